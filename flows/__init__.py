"""Prefect flows: each job's sequence written once, over `pipeline` functions."""
