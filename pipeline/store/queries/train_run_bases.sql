-- Every training run and the weights it started from (`base_revision`: a model revision, the
-- start weights or another run's checkpoint): with `checkpoint_revisions`, the lineage the
-- difficulty model's update clock runs along (pipeline.selection.evidence.lineage_clock).
SELECT train_id, base_revision FROM train_runs
