-- 1 when the ledger has a table of this name, else 0.
SELECT count(*) FROM information_schema.tables WHERE table_name = $table
