"""The policy as files: model folders, the built-in tiny policy, prompt rendering.

The built-in tiny policy is a character-level tokenizer (`tokenizer.py`) and a ~1 M-parameter
Llama-style model (`model.py`) saved as a normal Hugging Face model folder; `model.py` also gives
any local model folder's revision and loads it, `folders.py` keeps the model folders under
`<home>/models` (`sieve models add|list`), and `prompts.py` renders the prompts every sampling
backend shares. Training the tiny policy (`sieve bootstrap`) and evaluating a policy are jobs
(`pipeline.jobs.train.bootstrap`, `pipeline.jobs.analysis.evaluate`).

Test: `.venv/bin/pytest tests/policy -q`.
"""
