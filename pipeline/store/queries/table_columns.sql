-- Columns of one ledger table, in order.
SELECT column_name
FROM information_schema.columns
WHERE table_name = $table
ORDER BY ordinal_position
