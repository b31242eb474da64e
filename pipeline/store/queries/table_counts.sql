-- Row counts of the ledger tables.
SELECT table_name AS "table", estimated_size AS "rows"
FROM duckdb_tables()
WHERE database_name = current_database() AND NOT internal
ORDER BY table_name
