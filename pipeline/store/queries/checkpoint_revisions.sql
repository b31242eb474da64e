-- Every checkpoint as (train run, step, the model revision it holds): where each revision sits
-- on the lineage clock (pipeline.selection.evidence.lineage_clock).
SELECT train_id, step, model_revision FROM checkpoints
