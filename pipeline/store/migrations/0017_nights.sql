-- 0017: the nights `sieve loop` finished (issue 47): re-running a finished `sieve loop --nights 1
-- --start D` trained night D again, on the weights night D had produced. `flows.loop.loop` writes
-- a row when a night ends (trained, or with nothing kept to train on) and skips a night whose
-- row belongs to the lineage it would continue: its `final_revision` is the lineage head or an
-- ancestor of it (`--again` runs it anyway). A crashed night has no row: its re-run resumes it.
-- Forward-only: never edit this file once released; add a new numbered file instead.

CREATE TABLE nights (
    night           DATE NOT NULL,       -- the night's date (its curation seed follows from it)
    start_revision  VARCHAR NOT NULL,    -- the weights the night curated and trained from
    final_revision  VARCHAR NOT NULL,    -- the weights it ended with (start_revision: untrained)
    curriculum_id   VARCHAR,
    train_id        VARCHAR,             -- NULL when the curation kept nothing to train on
    finished_at     TIMESTAMPTZ NOT NULL
    -- natural key (night, start_revision), kept by the write path
);

INSERT INTO sieve_natural_keys VALUES ('nights', ['night', 'start_revision']);
