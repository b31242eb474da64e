-- The verifier version one run's row records and whether the run holds rollouts: a resumed
-- curation run must not add verdicts of another version (pipeline.jobs.curate.curation.check_resume).
SELECT
    s.verifier_version,
    EXISTS (SELECT 1 FROM rollouts AS r WHERE r.run_id = s.run_id) AS has_rollouts
FROM sampling_runs AS s
WHERE s.run_id = $run_id
