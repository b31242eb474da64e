-- Problems of a new file (the registered `_sieve_ingest`: problem_id, question, split) that the
-- ledger holds in the other split; the file gave its own splits, and a problem is in one split.
WITH clashes AS (
    SELECT i.question, i.split AS given, p.split AS stored
    FROM _sieve_ingest AS i
    JOIN problems AS p USING (problem_id)
    WHERE p.split <> i.split
)
SELECT question, given, stored, count(*) OVER () AS n
FROM clashes
ORDER BY question
LIMIT 1
