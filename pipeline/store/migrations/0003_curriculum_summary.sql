-- 0003: curriculum_summary no longer repeats the curriculum-wide rejection count on every stage
-- row (summing it over stages double-counted); rejections get their own per-reason view.
CREATE OR REPLACE VIEW curriculum_summary AS
SELECT
    i.curriculum_id,
    i.stage,
    count(*)                                         AS n_items,
    count(*) FILTER (WHERE i.reason = 'replay')      AS n_replay,
    sum(i.group_size)                                AS rollouts_per_epoch,
    avg(i.group_size)                                AS mean_group_size,
    sum(i.weight)                                    AS total_weight,
    avg(i.p_mean)                                    AS mean_p,
    min(i.p_low)                                     AS min_p_low,
    max(i.p_high)                                    AS max_p_high
FROM curriculum_items AS i
GROUP BY i.curriculum_id, i.stage;

CREATE VIEW rejection_summary AS
SELECT curriculum_id, reason, count(*) AS n_prompts
FROM rejections
GROUP BY curriculum_id, reason;
