"""Prefect flows: thin wrappers over `pipeline` functions. Filled in by the curation issue."""
