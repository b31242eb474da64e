-- The stored curation samples of the given runs ($runs: screen/refine run ids), with each run's
-- sampling settings so the caller can refuse settings the trainer does not sample with, and their
-- sampled token ids (migration 0013; NULL for older rows, which the caller re-tokenises).
SELECT
    r.problem_id,
    r.run_id,
    r.sample_idx,
    r.completion,
    r.n_tokens,
    r.token_ids,
    r.finish_reason,
    s.model_revision,
    s.temperature,
    s.top_p,
    s.max_new_tokens,
    coalesce(len(s.stop), 0) AS n_stop
FROM rollouts AS r
JOIN sampling_runs AS s USING (run_id)
WHERE list_contains($runs, r.run_id)
ORDER BY r.problem_id, s.started_at, r.run_id, r.sample_idx
