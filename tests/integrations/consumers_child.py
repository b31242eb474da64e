"""Load Sieve exports with verl's and OpenRLHF's own dataset code (run by test_consumers.py).

`python consumers_child.py verl|openrlhf FILE TOKENIZER_DIR` prints one JSON line. It runs in a
child process whose PYTHONPATH holds `.venv/consumers` (verl and OpenRLHF installed there with
`--no-deps`: both wheels ship a top-level `tests` package that must not shadow Sieve's). Their
package `__init__` files import Ray, DeepSpeed and vLLM, which are not installed here, so the
packages are registered as bare namespaces and only the dataset modules are imported: verl's
`verl.utils.dataset.rl_dataset` (RLHFDataset, collate_fn) and OpenRLHF's
`openrlhf.datasets.utils` (blending_datasets) and `openrlhf.datasets.prompts_dataset`
(PromptDataset), unchanged.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import types
from types import SimpleNamespace


def bare_packages(root_name: str, subpackages: list[str]) -> None:
    """Register `root_name` and its `subpackages` without running their __init__ files."""
    spec = importlib.util.find_spec(root_name)
    assert spec is not None and spec.submodule_search_locations, root_name
    root = next(iter(spec.submodule_search_locations))
    for name in [root_name, *subpackages]:
        module = types.ModuleType(name)
        module.__path__ = [os.path.join(root, *name.split(".")[1:])]
        sys.modules[name] = module


def load_verl(path: str, tokenizer_dir: str) -> dict:
    from omegaconf import OmegaConf
    from torch.utils.data import DataLoader
    from transformers import AutoTokenizer

    bare_packages("verl", ["verl.utils", "verl.utils.dataset"])
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from pipeline.integrations.verl import CurriculumSampler

    config = OmegaConf.create(
        {"cache_dir": tempfile.mkdtemp(), "prompt_key": "prompt", "max_prompt_length": 512,
         "filter_overlong_prompts": False, "return_raw_chat": True}
    )  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    dataset = RLHFDataset(data_files=[path], tokenizer=tokenizer, config=config)
    sampler = CurriculumSampler(dataset, OmegaConf.create({"seed": 0, "rollout_n": 8}))
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, collate_fn=collate_fn)
    batches = list(loader)
    stages = [int(info["stage"]) for b in batches for info in b["extra_info"]]
    first = dataset[0]
    return {
        "rows": len(dataset),
        "yielded": len(stages),
        "sampler_len": len(sampler),
        "stages": stages,
        "first_prompt": first["raw_prompt"],
        "first_extra_info": {k: v for k, v in first["extra_info"].items()},
        "ground_truth": first["reward_model"]["ground_truth"],
        "batch_keys": sorted(batches[0]),
    }


def load_openrlhf(path: str, tokenizer_dir: str) -> dict:
    from transformers import AutoTokenizer

    bare_packages("openrlhf", ["openrlhf.datasets"])
    from openrlhf.datasets.prompts_dataset import PromptDataset
    from openrlhf.datasets.utils import blending_datasets

    data_args = SimpleNamespace(input_key="input", label_key="label", apply_chat_template=False)
    strategy = SimpleNamespace(
        args=SimpleNamespace(data=data_args, use_ms=False), is_rank_0=lambda: True, print=print
    )
    data = blending_datasets(path, None, strategy)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    dataset = PromptDataset(data, tokenizer, strategy)
    _sources, prompts, labels, _ = dataset.collate_fn([dataset[i] for i in range(len(dataset))])
    return {
        "rows": len(dataset),
        "prompts": list(prompts),
        "labels": list(labels),
        "stages": [int(s) for s in data["stage"]],
        "extra": sorted(data.column_names),
    }


def main() -> None:
    kind, path, tokenizer_dir = sys.argv[1:4]
    result = (
        load_verl(path, tokenizer_dir) if kind == "verl" else load_openrlhf(path, tokenizer_dir)
    )
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
