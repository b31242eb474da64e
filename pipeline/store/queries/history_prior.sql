-- Per problem x revision: pooled samples and whether the group never disagreed, over sampled
-- (temperature > 0) runs, leaving out the runs of the curation being computed ($exclude), so a
-- re-run sees the same history as the first run. family and level (null for a problem not in
-- `problems`) let the same rows serve the per-cell candidate allocation.
-- Training evidence: where a training run started from that revision drew
-- the problem (train_rollouts), its samples join the pool, and the training verdict, newer than
-- the curation's, decides zero_variance: a prompt is zero-variance when every training group of
-- it (one per run x step, `train_group_stats`, with a judged reward) was flat by the one rule
-- (sieve_uninformative: all wrong, all right, or equal rewards), so training never got a
-- gradient from it; one group that disagreed makes it informative. Per group,
-- not pooled: a prompt all right at one step and all wrong at a later one disagrees when pooled
-- but gave no group a signal, so it is zero-variance; and all right in every group (k = n) is
-- zero-variance as much as never solved (k = 0).
-- `solved_in_training`: the newest training group of the problem (latest run, last step) was
-- all correct: the policy has learned it, so curation does not screen it again at small G; it
-- is a replay candidate (`pipeline.selection.rules.history_prior`).
WITH sampled AS (
    SELECT
        r.problem_id,
        s.model_revision,
        count(r.reward) AS n,
        count(*) FILTER (WHERE r.correct) AS k,
        sieve_uninformative(max(r.reward), min(r.reward)) AS zero_variance,
        max(coalesce(s.finished_at, s.started_at)) AS last_seen
    FROM rollouts AS r
    JOIN sampling_runs AS s USING (run_id)
    WHERE coalesce(s.temperature, 1.0) > 0
      AND NOT list_contains($exclude, s.run_id)
    GROUP BY r.problem_id, s.model_revision
),
trained AS (
    SELECT
        g.problem_id,
        t.base_revision AS model_revision,
        sum(g.n) AS n,
        sum(g.k) AS k,
        coalesce(bool_and(NOT g.informative) FILTER (WHERE g.n > 0), false) AS flat,
        arg_max(g.n > 0 AND g.k = g.n, (t.started_at, g.step)) AS solved_in_training,
        max(coalesce(t.finished_at, t.started_at)) AS last_seen
    FROM train_group_stats AS g
    JOIN train_runs AS t USING (train_id)
    WHERE t.base_revision IS NOT NULL AND NOT g.skipped  -- a skip observes nothing
    GROUP BY g.problem_id, t.base_revision
)
SELECT
    s.problem_id,
    p.family,
    p.level,
    s.model_revision,
    s.n + coalesce(t.n, 0) AS n,
    s.k + coalesce(t.k, 0) AS k,
    CASE WHEN coalesce(t.n, 0) > 0 THEN t.flat ELSE s.zero_variance END AS zero_variance,
    coalesce(t.solved_in_training, false) AS solved_in_training,
    greatest(s.last_seen, t.last_seen) AS last_seen
FROM sampled AS s
LEFT JOIN trained AS t USING (problem_id, model_revision)
LEFT JOIN problems AS p USING (problem_id)
