-- Runs left 'running' by a killed process become 'crashed' (a resumed run sets its own status).
UPDATE sampling_runs SET status = 'crashed' WHERE status = 'running'
