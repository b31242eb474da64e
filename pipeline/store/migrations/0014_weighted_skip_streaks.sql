-- 0014: a zero-variance streak is weighed by each group's size (issue 46 point 6,
-- grpo_core.history.visit_weight: a G = 4 screen adds half a visit), so the streak a skip saw is
-- real-valued: train_skips.streak becomes DOUBLE (existing integer streaks keep their values).
-- Forward-only: never edit this file once released; add a new numbered file instead.

ALTER TABLE train_skips ALTER streak TYPE DOUBLE;
