-- 0002: an identity for each ledger file, so caches keyed on "this ledger" (Prefect task
-- results) never mistake a recreated ledger for the one whose chunks they remember.
CREATE TABLE sieve_meta (
    key    VARCHAR PRIMARY KEY,
    value  VARCHAR NOT NULL
);

INSERT INTO sieve_meta VALUES ('ledger_id', uuid()::VARCHAR);
