-- 0018: selection_calibration (issue 62 point 5): is the difficulty model's forecast right on the
-- run it picks for? A training run whose batches the model picked (selection = 'posterior')
-- records per step the metric predicted_informative: the mean over the batch of the posterior
-- predictive P(0 < k < G) under the model that picked it. Per run and quarter of the steps that
-- recorded it (quarter q of the span first..last step holds the steps with
-- floor(4 (step - first) / (last - first + 1)) = q - 1; the same four windows as the forecast's
-- reliability per quarter, whatever the run's length), this view sets the predicted informative
-- share against the realised one: the share of the quarter's trained groups (train_group_stats,
-- not skipped, scored: n > 0) that were informative (Sieve's one rule, sieve_uninformative).
-- The predicted share is each step's prediction weighted by the groups the step trained (the
-- expected informative groups over the groups; the plain mean of the steps' predictions when
-- every step trains a full batch). Runs without the metric (curriculum draws, posterior-screen)
-- have no rows. The prediction counts answers correct or not while the rule reads rewards: with
-- a reward that is not 0/1 correctness the two may part for that reason alone.
-- Forward-only: never edit this file once released; add a new numbered file instead.

CREATE OR REPLACE VIEW selection_calibration AS
WITH predicted AS (
    SELECT train_id, step, value AS predicted
    FROM train_metrics
    WHERE name = 'predicted_informative' AND isfinite(value)
),
span AS (
    SELECT train_id, min(step) AS first_step, max(step) - min(step) + 1 AS span
    FROM predicted
    GROUP BY train_id
),
realised AS (
    SELECT
        train_id,
        step,
        count(*)                                   AS groups,
        count(*) FILTER (WHERE informative)        AS informative_groups
    FROM train_group_stats
    WHERE NOT skipped AND n > 0
    GROUP BY train_id, step
),
steps AS (
    SELECT
        p.train_id,
        p.step,
        p.predicted,
        1 + (4 * (p.step - s.first_step)) // s.span AS quarter,
        coalesce(r.groups, 0)                       AS groups,
        coalesce(r.informative_groups, 0)           AS informative_groups
    FROM predicted AS p
    JOIN span AS s USING (train_id)
    LEFT JOIN realised AS r USING (train_id, step)
),
quarters AS (
    SELECT
        train_id,
        quarter,
        min(step)                                              AS first_step,
        max(step)                                              AS last_step,
        count(*)                                               AS steps,
        sum(groups)::BIGINT                                    AS groups,
        sum(informative_groups)::BIGINT                        AS informative_groups,
        sum(predicted * groups) / nullif(sum(groups), 0)       AS predicted_informative,
        sum(informative_groups) / nullif(sum(groups), 0)       AS realised_informative
    FROM steps
    GROUP BY train_id, quarter
)
SELECT
    *,
    abs(predicted_informative - realised_informative) AS abs_error
FROM quarters;
