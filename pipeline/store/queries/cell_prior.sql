-- Per family x level: k correct of n samples that the weights $revision were sampled to pass
-- (difficulty_by_family: every sampled run of them at temperature > 0, curation screens and
-- held-out evaluations alike, any split). What is known of each cell before a training run
-- from those weights starts: its start prior (pipeline.selection.evidence.ledger_cell_prior).
SELECT
    family || ' ' || level AS cell,
    pass_rate * n_samples AS k,
    n_samples::DOUBLE AS n
FROM difficulty_by_family
WHERE model_revision = $revision AND n_samples > 0
ORDER BY cell
