"""The built-in tiny policy: a character-level tokenizer and a ~1 M-parameter Llama-style model,
saved as a normal Hugging Face model folder, bootstrapped by supervised training on generated
problems (`sieve bootstrap`), plus the prompt rendering every sampling backend shares."""
