-- Every stored problem's question, answer and source, streamed in batches by `sieve ingest`,
-- which keeps those whose question a new file holds (as pipeline/problems/text.py reads it).
SELECT question, answer, source
FROM problems
