"""Drive SieveCurriculumSampler with verl's own dataset, batch and sampler code (run by
test_verl_posterior.py).

`python verl_posterior_child.py MODE HOME FILE MODEL_DIR` prints one JSON line. Like
consumers_child.py it runs with verl's folder on PYTHONPATH and registers verl's packages as
bare namespaces (their `__init__` files import what is not installed here); it imports verl's
`RLHFDataset` and `collate_fn`, its `DataProto` (verl.protocol, on tensordict) and its class
loader, unchanged. `rollout.n` is 4, a step 3 prompts. MODE:
- "class_path" (verl 0.7.1, `.venv/consumers-verl07`): the sampler named by
  `data.sampler.class_path` / `class_name` in an OmegaConf data config, built by verl's own
  `create_rl_sampler` (its source in verl/trainer/main_ppo.py, compiled alone: that module's
  imports start Ray and Hydra; torchdata, which only its shuffled branch uses, is a stub), and
  `update(batch)` after each of 3 steps, as verl 0.5-0.7's trainer calls it;
- "on_batch_end" (verl 0.9.1, `.venv/consumers`): the sampler given to the loader directly and
  attached to the dataset, whose `on_batch_end(batch=...)` verl ≥ 0.8's trainer calls after a
  step (2 steps).
Each step's batch is what verl's trainer holds then: the loader's batch as a DataProto with a
`uid` per prompt, repeated `n` times interleaved, joined with a generation output (`prompts`,
`responses`, `response_mask`, `attention_mask`) and `token_level_scores` (the reward at each
response's last token). A response is right when its problem's answer is even and its index in
the group is even: odd answers give all-wrong groups, even ones 2 right of 4.
"""

from __future__ import annotations

import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from consumers_child import bare_packages

N, BATCH, WIDTH = 4, 3, 6  # rollout.n, prompts a step, response budget


def step_batch(batch_dict: dict, DataProto: Any, with_acc: bool) -> Any:
    """The DataProto verl's trainer holds after a step's generation and reward."""
    import numpy as np
    import torch

    batch = DataProto.from_single_dict(batch_dict)
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch))],
                                             dtype=object)  # fmt: skip
    batch = batch.repeat(repeat_times=N, interleave=True)
    rows = len(batch)
    lengths = [WIDTH if j == 1 else 2 + j % 3 for j in range(rows)]  # one response fills it
    mask = torch.tensor([[1] * n + [0] * (WIDTH - n) for n in lengths])  # (rows, WIDTH)
    responses = torch.randint(10, 60, (rows, WIDTH)) * mask
    prompts = torch.ones(rows, 3, dtype=torch.long)
    gen = DataProto.from_dict(tensors={
        "prompts": prompts, "responses": responses, "response_mask": mask,
        "attention_mask": torch.cat([torch.ones_like(prompts), mask], dim=-1),
    })  # fmt: skip
    batch = batch.union(gen)
    answers = [int(r["ground_truth"]) for r in batch.non_tensor_batch["reward_model"]]
    right = [a % 2 == 0 and (j % N) % 2 == 0 for j, a in enumerate(answers)]
    scores = torch.zeros(rows, WIDTH)
    scores[torch.arange(rows), torch.tensor(lengths) - 1] = torch.tensor(right, dtype=torch.float)
    batch.batch["token_level_scores"] = scores
    if with_acc:  # a reward manager whose compute_score returned {"score", "acc"}
        batch.non_tensor_batch["acc"] = np.array(right, dtype=object)
    return batch


def verl_create_rl_sampler() -> Any:
    """verl's `create_rl_sampler` as its trainer/main_ppo.py defines it, compiled alone."""
    import ast
    import os
    import types

    import torch.utils.data
    from verl.experimental.dataset.sampler import AbstractSampler
    from verl.utils.import_utils import load_extern_object

    for name in (
        "torchdata",
        "torchdata.stateful_dataloader",
        "torchdata.stateful_dataloader.sampler",
    ):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["torchdata.stateful_dataloader.sampler"].RandomSampler = (  # type: ignore[attr-defined]
        torch.utils.data.RandomSampler
    )
    root = sys.modules["verl"].__path__[0]  # the bare package (consumers_child.bare_packages)
    path = os.path.join(root, "trainer", "main_ppo.py")
    tree = ast.parse(Path(path).read_text())
    (fn,) = [
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "create_rl_sampler"
    ]
    scope = {"load_extern_object": load_extern_object, "AbstractSampler": AbstractSampler}
    exec(compile(ast.Module([fn], []), path, "exec"), scope)
    return scope["create_rl_sampler"]


def drive(mode: str, home: str, path: str, model_dir: str) -> dict:
    import verl.protocol

    sys.modules["verl"].DataProto = verl.protocol.DataProto  # what verl/__init__ exports
    from omegaconf import OmegaConf
    from torch.utils.data import DataLoader
    from transformers import AutoTokenizer
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    config = OmegaConf.create({
        "cache_dir": tempfile.mkdtemp(), "prompt_key": "prompt", "max_prompt_length": 512,
        "filter_overlong_prompts": False, "return_raw_chat": True, "shuffle": False,
        "train_batch_size": BATCH, "dataloader_num_workers": 0, "seed": 0,
        "sampler": {"class_path": "pkg://pipeline.integrations.verl_posterior",
                    "class_name": "SieveCurriculumSampler", "home": home,
                    "model_path": model_dir, "train_id": f"verl-{mode}"},
    })  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    dataset = RLHFDataset(data_files=[path], tokenizer=tokenizer, config=config)
    if mode == "class_path":
        sampler: Any = verl_create_rl_sampler()(config, dataset)
        steps = 3
    else:
        from pipeline.integrations.verl_posterior import SieveCurriculumSampler

        sampler = SieveCurriculumSampler(dataset, config)
        sampler.attach(dataset)
        steps = 2
    loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler, collate_fn=collate_fn,
                        num_workers=0, drop_last=True)  # fmt: skip
    picked = []
    for step, batch_dict in enumerate(loader):
        picked.append([str(i["problem_id"]) for i in batch_dict["extra_info"]])
        batch = step_batch(batch_dict, DataProto, with_acc=mode != "class_path")
        if mode == "class_path":
            sampler.update(batch=batch)
        else:
            dataset.on_batch_end(batch=batch)
        if step + 1 == steps:
            break
    return {"picked": picked, "train_id": sampler.run.train_id, "prior": len(sampler.run.prior),
            "bases": [c.__name__ for c in type(sampler).__mro__]}  # fmt: skip


def main() -> None:
    mode, home, path, model_dir = sys.argv[1:5]
    subpackages = [
        "verl.utils",
        "verl.utils.dataset",
        "verl.experimental",
        "verl.experimental.dataset",
    ]
    bare_packages("verl", subpackages if mode == "class_path" else subpackages[:2])
    print(json.dumps(drive(mode, home, path, model_dir)))


if __name__ == "__main__":
    main()
