"""CPU training is bitwise reproducible, alone or beside other work.

Two trainings started at once on the same cores end with one weights hash: a kernel whose sum
order follows thread timing (parallel atomic adds of repeated indices) gives hashes apart in
their last bits there, while runs one after another mostly agree.

Run as a script (``python tests/test_train_reproducible.py MODEL OUT``) this file is the worker of
the two-process test: it trains a tiny CROSS-JEM on 2 threads and writes its weights hash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from toydata import long_split
from toymodels import write_tiny_bert


def _crossjem(model: Path | str) -> Any:
    from rankers.families.crossjem.ranker import CrossJEMRanker

    options = {
        "model": str(model),
        "max_item_len": 8,
        "union_len": 64,
        "order": "union",
        "train_batch_queries": 1,
        "train_max_items": 0,
        "epochs": 1,
        "min_steps": 0,
        "lr": 1e-3,
    }
    return CrossJEMRanker(CrossJEMRanker.Config.from_options(options))


#: trainings per worker process: a racing kernel changed about every other one
TRAININGS = 3


def _worker(model: str, out: str) -> None:
    """Train the tiny CROSS-JEM :data:`TRAININGS` times on 2 threads, one list of 512 items a
    step (its row's ten word positions pooled ~150 times each, from both threads); write the
    steps and weights hash of each to ``out``."""
    from rankers.io.models import state_hash

    torch.set_num_threads(2)
    runs = []
    for _ in range(TRAININGS):
        ranker = _crossjem(model)
        summary = ranker.fit(long_split(8, 512), None)
        runs.append([summary.steps, state_hash(ranker.module)])
    Path(out).write_text(json.dumps(runs))


@pytest.fixture(scope="module")
def wide_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT at width 64: a step's pooling gradients are large enough for torch's
    CPU kernels to split them over 2 threads."""
    return write_tiny_bert(tmp_path_factory.mktemp("wide-bert"), hidden=64)


def test_crossjem_backward_adds_no_repeated_indices_atomically(tiny_bert: Path) -> None:
    """CROSS-JEM's pooling gathers by ``index_select``: the backward of advanced indexing
    (``index_put`` with accumulate) adds repeated indices with racing atomic adds on CPU."""
    from torch.utils._python_dispatch import TorchDispatchMode

    accumulating: list[str] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
            if func.__name__.startswith(("index_put", "_index_put_impl")) and accumulate is True:
                accumulating.append(str(func))
            return func(*args, **kwargs)

    ranker = _crossjem(tiny_bert)
    split = long_split(2, 12)
    batch = ranker.prepare([(cl.query.text, cl.texts) for cl in split.lists])
    with Watch():
        logits, mask = ranker.forward(batch)
        logits.masked_fill(~mask, 0.0).sum().backward()
    assert accumulating == []
    grads = [p.grad for p in ranker.module.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_training_runs_deterministic_kernels_on_cpu_and_restores_the_setting(
    tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch.utils.deterministic

    from rankers.fit.lists import ListSteps

    seen: list[tuple[bool, bool, bool]] = []
    step = ListSteps.batch_loss

    def watched(self: ListSteps, batch: list[int], module: torch.nn.Module) -> Any:
        seen.append(
            (
                torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
                torch.utils.deterministic.fill_uninitialized_memory,
            )
        )
        return step(self, batch, module)

    monkeypatch.setattr(ListSteps, "batch_loss", watched)
    before = torch.are_deterministic_algorithms_enabled()
    _crossjem(tiny_bert).fit(long_split(1, 6), None)
    # in the steps: deterministic, warning (never stopping) where no such kernel exists, and
    # no NaN fill of new tensors
    assert seen == [(True, True, False)]
    assert torch.are_deterministic_algorithms_enabled() is before
    assert torch.utils.deterministic.fill_uninitialized_memory is True


@pytest.mark.processes
def test_two_trainings_at_once_end_with_one_weights_hash(wide_bert: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "MKL_DYNAMIC": "FALSE",
        "OMP_WAIT_POLICY": "PASSIVE",  # as `bench` runs: sleeping threads, timing follows load
        "TOKENIZERS_PARALLELISM": "false",
    }
    outs = [tmp_path / f"run{i}.json" for i in (0, 1)]
    started = [
        subprocess.Popen(
            [sys.executable, __file__, str(wide_bert), str(out)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for out in outs
    ]
    for process in started:
        _, err = process.communicate(timeout=240)
        assert process.returncode == 0, err[-4000:]
    runs = [run for out in outs for run in json.loads(out.read_text())]
    assert len(runs) == 2 * TRAININGS and runs[0][0] == 8
    assert [run == runs[0] for run in runs] == [True] * len(runs), runs


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
