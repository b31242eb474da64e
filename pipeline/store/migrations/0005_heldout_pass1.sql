-- 0005: the one definition of held-out pass@1. `sieve eval`, training's before/after table, the
-- nightly flow, `sieve stats`, the HTML report and the benchmarks all read these views.
--
-- * Mode: an eval run is `greedy` when it recorded temperature 0 and `sampled` otherwise (a NULL
--   temperature reads as sampled, as in prompt_stats). Never by group size: a sampled run may
--   draw a single sample per problem (eval_samples = 1).
-- * pass@1 of a problem in a run = correct samples / all its samples. A sample whose verifier
--   failed (reward NULL) counts as wrong and is also counted in `errors`: leaving it out of the
--   denominator would let a verifier that crashes on wrong answers raise the score.
-- * pass@1 of a family x level, or of the whole run, = the mean over its problems (each problem
--   weighs the same, whatever its sample count).
-- * `latest`: the newest run of its model revision x mode, the one a revision's tables show.

-- One row per eval run x problem.
CREATE VIEW heldout_problem_pass1 AS
SELECT
    r.run_id,
    r.problem_id,
    count(*)                                         AS samples,
    count(*) FILTER (WHERE r.correct)                AS correct,
    count(*) FILTER (WHERE r.reward IS NULL)         AS errors,
    count(*) FILTER (WHERE r.correct) / count(*)     AS pass1
FROM rollouts AS r
JOIN sampling_runs AS s USING (run_id)
WHERE s.purpose = 'eval'
GROUP BY r.run_id, r.problem_id;

-- One row per eval run: its mode, whether it is the newest of its revision x mode, and its
-- pass@1 over all its problems.
CREATE VIEW heldout_runs AS
WITH runs AS (
    SELECT
        run_id,
        model,
        model_revision,
        backend,
        group_size,
        temperature,
        top_p,
        max_new_tokens,
        seed,
        coalesce(started_at, finished_at)            AS started_at,
        CASE WHEN temperature = 0 THEN 'greedy' ELSE 'sampled' END AS mode
    FROM sampling_runs
    WHERE purpose = 'eval'
), ranked AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY model_revision, mode ORDER BY started_at DESC NULLS LAST, run_id DESC
        ) = 1                                        AS latest
    FROM runs
), totals AS (
    SELECT
        run_id,
        count(*)                                     AS problems,
        sum(samples)::BIGINT                         AS samples,
        sum(errors)::BIGINT                          AS errors,
        avg(pass1)                                   AS pass1
    FROM heldout_problem_pass1
    GROUP BY run_id
)
SELECT
    k.*,
    coalesce(t.problems, 0)                          AS problems,
    coalesce(t.samples, 0)                           AS samples,
    coalesce(t.errors, 0)                            AS errors,
    t.pass1
FROM ranked AS k
LEFT JOIN totals AS t USING (run_id);

-- One row per eval run x family x level.
CREATE VIEW heldout_pass1 AS
SELECT
    h.run_id,
    h.model_revision,
    h.mode,
    h.temperature,
    h.group_size,
    h.started_at,
    h.latest,
    p.family,
    p.level,
    count(*)                                         AS problems,
    sum(x.samples)::BIGINT                           AS samples,
    sum(x.errors)::BIGINT                            AS errors,
    avg(x.pass1)                                     AS pass1
FROM heldout_problem_pass1 AS x
JOIN heldout_runs AS h USING (run_id)
JOIN problems AS p USING (problem_id)
GROUP BY h.run_id, h.model_revision, h.mode, h.temperature, h.group_size, h.started_at, h.latest,
    p.family, p.level;
