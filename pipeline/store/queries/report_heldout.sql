-- Held-out pass@1 by family x level, before (earliest evaluated revision) and after (latest),
-- separately for greedy and sampled runs: each revision's newest run of a mode, from the
-- heldout_pass1 view (migration 0005: one definition of pass@1, mode and verifier errors).
WITH revisions AS (
    SELECT model_revision, min(started_at) AS first_at, max(started_at) AS last_at
    FROM heldout_runs
    GROUP BY model_revision
), ends AS (
    SELECT
        arg_min(model_revision, first_at) AS before_rev,
        arg_max(model_revision, last_at) AS after_rev
    FROM revisions
), shown AS (
    SELECT h.*, x.before_rev, x.after_rev
    FROM heldout_pass1 AS h
    CROSS JOIN ends AS x
    WHERE h.latest AND h.model_revision IN (x.before_rev, x.after_rev)
)
SELECT
    family,
    level,
    mode,
    any_value(before_rev)                                    AS before_revision,
    any_value(after_rev)                                     AS after_revision,
    max(pass1) FILTER (WHERE model_revision = before_rev)    AS before,
    max(pass1) FILTER (WHERE model_revision = after_rev)     AS after,
    max(samples) FILTER (WHERE model_revision = after_rev)   AS after_samples,
    max(errors) FILTER (WHERE model_revision = after_rev)    AS after_errors
FROM shown
GROUP BY family, level, mode
ORDER BY family, level, mode
