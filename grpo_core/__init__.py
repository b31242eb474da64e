"""GRPO algorithm and trainer. Imports torch (and transformers for models) only — never
`pipeline`, DuckDB or Prefect. Filled in by the trainer issue."""
