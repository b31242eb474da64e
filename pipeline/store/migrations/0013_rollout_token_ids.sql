-- 0013: each rollout's sampled token ids (`Completion.token_ids`, as the sampler reported them:
-- vLLM's end with the end-of-sequence token of a completion that stopped there, the hf
-- backend's end before it). Curation replay (pipeline/replay.py) trains on a stored screen or
-- refine completion; with only its text it had to re-tokenise it, which need not give the ids
-- that were sampled, and a prompt whose re-tokenisation had another length was sampled fresh
-- instead (12 of 82 prompts on a SmolLM2 night). With the ids stored, replay uses them as
-- sampled and re-tokenises only rows without them.
-- NULL: a row written before this migration, or a sampler that reported no ids (an openai
-- server without vLLM's `return_token_ids`). A nullable column added at the end: every writer
-- and reader names its columns, and rows already stored are not rewritten.
-- Forward-only: never edit this file once released; add a new numbered file instead.

ALTER TABLE rollouts ADD COLUMN token_ids INTEGER[];
