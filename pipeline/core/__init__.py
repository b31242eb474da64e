"""Plumbing that every part of the pipeline shares, below all of them.

User-fixable errors (`errors`), the Sieve home (`home`), progress events (`hooks`), child
processes (`procs`), log routing (`runlog`), crash points (`crash`), phase timing (`timing`), TOML
settings files (`tomlconfig`) and guarded output files (`outputs`, `output_paths`). The bottom
layer inside `pipeline/`: it imports no other pipeline package.

Test: `.venv/bin/pytest tests/test_home.py tests/test_hooks.py tests/test_layers.py -q`.
"""
