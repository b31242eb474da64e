-- Each step of one training run and the share of its trained groups that were informative
-- (the closed loop's record, pipeline.selection.batch_choice: a resumed run steers on it).
-- A prompt trained twice in one step is one group here. $train_id: the run.
SELECT
    step,
    avg(informative::DOUBLE) AS share
FROM train_group_stats
WHERE train_id = $train_id
  AND n > 0
  AND NOT skipped
GROUP BY step
ORDER BY step
