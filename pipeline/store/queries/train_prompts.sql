-- Every train-split problem and its cell (family level): the prompts the difficulty model
-- scores over the whole ledger (pipeline.selection.evidence.ledger_posterior).
SELECT problem_id, family || ' ' || level AS cell FROM problems WHERE split = 'train'
