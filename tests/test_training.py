"""List trainer: optimiser and batches, exact resume after a crash, cached teacher scores, and
training in two CPU processes (gloo) that must match one process.

Run as a script (``python -m torch.distributed.run ... tests/test_training.py MODEL OUT``) this
file is also the worker of the two-process test.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from toydata import gold_split

from rankers.base import RankerError
from rankers.families.crossjem.ranker import CrossJEMRanker
from rankers.families.monobert import MonoBERTRanker
from rankers.fit.lists import ListBatches, fit_lists
from rankers.fit.optim import adamw_linear, make_accelerator
from rankers.fit.resume import CHECKPOINT_DIR, LATEST_FILE
from rankers.fit.targets import TEACHER_CACHE_DIR, sigmoid, teacher_logits
from rankers.io.models import state_hash


def _crossjem(model: Path | str, **options: Any) -> CrossJEMRanker:
    base = {"model": str(model), "max_item_len": 8, "union_len": 64, "train_batch_queries": 4}
    ranker = CrossJEMRanker(CrossJEMRanker.Config.from_options({**base, **options}))
    assert isinstance(ranker, CrossJEMRanker)
    return ranker


# -- optimiser and batches -----------------------------------------------------------------------
def test_adamw_linear_groups_and_schedule() -> None:
    module = torch.nn.Sequential()
    module.add_module("dense", torch.nn.Linear(2, 2))
    module.add_module("LayerNorm", torch.nn.LayerNorm(2))
    optimizer, scheduler = adamw_linear(
        module, lr=1e-4, weight_decay=0.01, warmup_ratio=0.2, total_steps=10
    )
    decay, no_decay = optimizer.param_groups
    assert [p.shape for p in decay["params"]] == [(2, 2)] and decay["weight_decay"] == 0.01
    assert len(no_decay["params"]) == 3 and no_decay["weight_decay"] == 0.0  # 2 biases + LN weight
    lrs = []
    for _ in range(10):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    # 2 warm-up steps (0, lr/2), then linear decay from lr at step 2 to 0 at step 10
    expected = [0.0, 0.5e-4, 1e-4, 0.875e-4, 0.75e-4, 0.625e-4, 0.5e-4, 0.375e-4, 0.25e-4, 0.125e-4]
    np.testing.assert_allclose(lrs, expected, rtol=1e-9, atol=1e-15)


def test_list_batches_reshuffle_per_epoch_and_pad_with_zero_weight_lists() -> None:
    batches = ListBatches(n_lists=10, batch_size=4, seed=0, pad=True)
    first = list(batches)
    assert len(batches) == 3 and [len(b) for b in first] == [4, 4, 4]
    real = [i for b in first for i in b if i >= 0]
    assert sorted(real) == list(range(10))
    # the two padding slots repeat the epoch's first two lists, marked -1 - i
    assert first[2][2:] == [-1 - first[0][0], -1 - first[0][1]]
    assert list(batches) == first  # same epoch, same order
    batches.epoch = 2
    assert list(batches) != first
    assert [len(b) for b in ListBatches(10, 4, seed=0, pad=False)] == [4, 4, 2]


def test_accelerate_state_left_by_another_setup_is_replaced() -> None:
    """Accelerate keeps one state per process; a single process may train again differently."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    # start from a clean process state whatever earlier tests left, then leave a bf16 one behind
    AcceleratorState._reset_state(reset_partial_state=True)
    assert Accelerator(cpu=True, mixed_precision="bf16").mixed_precision == "bf16"
    accelerator = make_accelerator("cpu", "auto")  # CPU trains in float32 whatever the dtype
    assert (accelerator.mixed_precision, accelerator.num_processes) == ("no", 1)
    assert accelerator.split_batches


# -- resume --------------------------------------------------------------------------------------
class Crash(Exception):
    """Stands for the process dying right after a checkpoint was published."""


def _resume_options() -> dict[str, Any]:
    # dropout on: resuming must restore the RNG exactly, not only weights and optimizer
    return {"epochs": 2, "lr": 2e-3, "dropout": 0.1, "checkpoint_steps": 2}


@pytest.fixture(scope="module")
def uninterrupted(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ranker = _crossjem(tiny_bert, **_resume_options())
    work = tmp_path_factory.mktemp("uninterrupted")
    ranker.work_dir = work
    return ranker.fit(gold_split("train", 0), gold_split("dev", 1, 6)).to_json()


def test_checkpoints_do_not_change_training(tiny_bert: Path, uninterrupted: dict[str, Any]) -> None:
    plain = (
        _crossjem(tiny_bert, **_resume_options())
        .fit(gold_split("train", 0), gold_split("dev", 1, 6))
        .to_json()
    )
    assert plain["weights_hash"] == uninterrupted["weights_hash"]
    assert plain["checkpoint"] is None and uninterrupted["checkpoint"] is not None
    folder = Path(uninterrupted["checkpoint"])
    # one published state, no temporary folder left
    assert sorted(p.name for p in folder.iterdir()) == ["epoch002-step0000006", LATEST_FILE]
    meta = json.loads((folder / LATEST_FILE).read_text())
    assert (meta["epoch"], meta["step"], meta["state"]) == (2, 6, "epoch002-step0000006")


@pytest.mark.parametrize(
    ("crash_step", "resumed_from"),
    [(3, {"epoch": 1, "step": 3}), (4, {"epoch": 1, "step": 4})],
    ids=["epoch-end", "mid-epoch"],
)
def test_resume_after_crash_ends_with_identical_weights(
    tiny_bert: Path,
    tmp_path: Path,
    uninterrupted: dict[str, Any],
    crash_step: int,
    resumed_from: dict[str, int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """3 steps per epoch, checkpoints at steps 2, 3 (epoch 1), 4, 6 (epoch 2): crash after
    step 3 (an epoch end) or step 4 (inside epoch 2), resume in a fresh ranker."""
    train, dev = gold_split("train", 0), gold_split("dev", 1, 6)

    def crash(where: dict[str, int]) -> None:
        if where["step"] == crash_step:
            raise Crash(where)

    with pytest.raises(Crash):
        fit_lists(
            _crossjem(tiny_bert, **_resume_options()),
            train,
            dev,
            work_dir=tmp_path,
            on_checkpoint=crash,
        )
    resumed = _crossjem(tiny_bert, **_resume_options())
    resumed.work_dir = tmp_path
    with caplog.at_level(logging.INFO, logger="rankers.fit.resume"):
        summary = resumed.fit(train, dev).to_json()
    assert "resuming from" in caplog.text
    assert summary["resumed_from"] == resumed_from
    for key in ("weights_hash", "epoch_weights_hash", "loss", "dev_AP@10", "dev_AP@10_before"):
        assert summary[key] == uninterrupted[key], key
    assert summary["best_epoch"] == uninterrupted["best_epoch"]
    assert state_hash(resumed.module) == uninterrupted["weights_hash"]
    # a finished checkpoint resumes to the end at once: same result, nothing trained
    again = _crossjem(tiny_bert, **_resume_options())
    again.work_dir = tmp_path
    repeat = again.fit(train, dev).to_json()
    assert repeat["resumed_from"] == {"epoch": 2, "step": 6}
    assert repeat["weights_hash"] == uninterrupted["weights_hash"]


def test_checkpoint_of_other_settings_is_not_resumed(
    tiny_bert: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    train = gold_split("train", 0)
    first = _crossjem(tiny_bert, epochs=1)
    first.work_dir = tmp_path
    first.fit(train)
    other = _crossjem(tiny_bert, epochs=1, lr=5e-4)
    other.work_dir = tmp_path
    with caplog.at_level(logging.WARNING, logger="rankers.fit.resume"):
        summary = other.fit(train).to_json()
    assert summary["resumed_from"] is None
    assert "saved with other settings, data or targets" in caplog.text
    # scoring-only options are not settings of the training: that checkpoint is resumed
    fast = _crossjem(tiny_bert, epochs=1, lr=5e-4, batch_queries=2, checkpoint_steps=1)
    fast.work_dir = tmp_path
    assert fast.fit(train).resumed_from == {"epoch": 1, "step": 3}


# -- targets -------------------------------------------------------------------------------------
class CountingTeacher(MonoBERTRanker):
    """A real (untrained) monoBERT teacher that counts its score calls."""

    calls = 0

    def score(self, lists):  # type: ignore[no-untyped-def]
        type(self).calls += 1
        return super().score(lists)


def _teacher(model: Path, seed: int) -> CountingTeacher:
    teacher = CountingTeacher(
        CountingTeacher.Config.from_options({"model": str(model), "seed": seed})
    )
    assert isinstance(teacher, CountingTeacher)
    return teacher


def test_teacher_scores_are_computed_once_and_cached(tiny_bert: Path, tmp_path: Path) -> None:
    train = gold_split("train", 0)
    teacher = _teacher(tiny_bert, seed=7)
    CountingTeacher.calls = 0
    logits = teacher.score(train.lists)
    assert CountingTeacher.calls == 1

    first = fit_lists(
        _crossjem(tiny_bert, loss="rpl", epochs=1), train, teacher=teacher, work_dir=tmp_path / "a"
    ).to_json()
    assert CountingTeacher.calls == 2
    cache = tmp_path / TEACHER_CACHE_DIR
    (cached,) = cache.iterdir()
    assert first["teacher"] == {
        "name": "monobert",
        "weights_hash": state_hash(teacher.module),
        "path": None,
        "cache": str(cached),
        "scores": "sigmoid",
    }
    assert first["targets"] == f"teacher {state_hash(teacher.module)}"
    assert cached.name.startswith(f"monobert-{state_hash(teacher.module)}-")
    with np.load(cached) as data:
        assert data["qids"].tolist() == [cl.query.qid for cl in train.lists]
        np.testing.assert_array_equal(data["logits"], np.concatenate(logits).astype(np.float64))
    assert first["skipped_queries"] == 0  # teacher probabilities give RPL signal everywhere

    # a second fit (other work dir, same parent) reads the cache: same targets, same weights
    second = fit_lists(
        _crossjem(tiny_bert, loss="rpl", epochs=1), train, teacher=teacher, work_dir=tmp_path / "b"
    ).to_json()
    assert CountingTeacher.calls == 2
    assert second["teacher"]["cache"] == str(cached)
    assert second["weights_hash"] == first["weights_hash"]

    # another teacher (other head weights) or other lists get their own file
    _, other = teacher_logits(_teacher(tiny_bert, seed=8), train.lists, train.checksum, cache)
    _, fewer = teacher_logits(teacher, train.lists[:5], train.checksum, cache)
    assert CountingTeacher.calls == 4
    assert len({cached, other, fewer}) == 3 and len(list(cache.iterdir())) == 3


def test_teacher_logits_become_sigmoid_probabilities() -> None:
    np.testing.assert_allclose(
        sigmoid(np.array([0.0, 2.0, -2.0])), [0.5, 0.880797, 0.119203], atol=1e-6
    )


def test_rpl_on_binary_labels_fails_before_training(tiny_bert: Path, tmp_path: Path) -> None:
    ranker = _crossjem(tiny_bert, loss="rpl", epochs=1)
    ranker.work_dir = tmp_path
    with pytest.raises(RankerError, match="RPL needs graded or teacher scores") as err:
        ranker.fit(gold_split("train", 0))
    assert "toy/train (qrels grades)" in str(err.value)
    assert not (tmp_path / CHECKPOINT_DIR).exists()  # not a single step was trained


def test_labels_only_training_records_its_setup(tiny_bert: Path) -> None:
    summary = _crossjem(tiny_bert, loss="ce", epochs=1).fit(gold_split("train", 0)).to_json()
    assert summary["targets"] == "qrels grades" and summary["teacher"] is None
    assert (summary["processes"], summary["mixed_precision"], summary["resumed_from"]) == (
        1,
        "no",
        None,
    )
    assert summary["optimizer"] == {
        "name": "AdamW",
        "lr": 1e-4,
        "weight_decay": 0.01,
        "schedule": "linear",
        "warmup_steps": 0,  # int(0.1 * 3 steps)
        "max_grad_norm": 1.0,
    }
    assert summary["steps"] == 3 and summary["seconds"] > 0 and len(summary["loss"]) == 1


# -- two processes -------------------------------------------------------------------------------
def _distributed_options() -> dict[str, Any]:
    # 12 lists, 8 per step: the second step has 4 real lists + 4 zero-weight padding lists, so
    # process 1 gets only padding there; no dropout, so one process must train the same way
    return {"epochs": 2, "lr": 1e-3, "dropout": 0.0, "train_batch_queries": 8}


def _worker(model: str, out: str) -> None:
    """One of the processes of test_two_processes_train_like_one."""
    from accelerate import PartialState

    ranker = _crossjem(model, **_distributed_options())
    summary = fit_lists(
        ranker, gold_split("train", 0), gold_split("dev", 1, 6), work_dir=Path(out) / "work"
    ).to_json()
    state = PartialState()
    result = {"weights_hash": state_hash(ranker.module), "summary": summary}
    (Path(out) / f"rank{state.process_index}.json").write_text(json.dumps(result))
    if state.is_main_process:
        ranker.save(Path(out) / "model")


def test_cpu_processes_wait_without_cuda_device_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Accelerate's barrier names cuda:<local rank> whenever CUDA is visible, even for gloo: two
    CPU processes on a one-GPU machine failed there. CPU processes must use a plain barrier."""
    import types

    import torch.distributed

    from rankers.fit.resume import wait_for_everyone

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(torch.distributed, "barrier", lambda *a, **k: calls.append((a, k)))
    accelerate_calls: list[str] = []

    def state(device: str, processes: int) -> Any:
        return types.SimpleNamespace(
            num_processes=processes,
            device=torch.device(device),
            wait_for_everyone=lambda: accelerate_calls.append(device),
        )

    wait_for_everyone(state("cpu", 1))
    assert calls == [] and accelerate_calls == []  # one process: nothing to wait for
    wait_for_everyone(state("cpu", 2))
    assert calls == [((), {})] and accelerate_calls == []  # no device_ids for gloo
    wait_for_everyone(state("cuda:0", 2))
    assert accelerate_calls == ["cuda:0"]  # GPU processes keep Accelerate's NCCL barrier


@pytest.mark.processes
def test_two_processes_train_like_one(tiny_bert_no_dropout: Path, tmp_path: Path) -> None:
    tiny_bert = tiny_bert_no_dropout
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # rendezvous on a free localhost port
        "--nproc_per_node=2",
        __file__,
        str(tiny_bert),
        str(tmp_path),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in (0, 1)]
    summary = ranks[0]["summary"]
    assert ranks[0]["weights_hash"] == ranks[1]["weights_hash"] == summary["weights_hash"]
    # dev scores and losses come from the main process; only the wall-clock times differ
    assert {**ranks[1]["summary"], "seconds": 0} == {**summary, "seconds": 0}
    assert (summary["processes"], summary["steps"], summary["resumed_from"]) == (2, 4, None)
    assert (tmp_path / "work" / CHECKPOINT_DIR / LATEST_FILE).is_file()

    # the saved model loads and scores with the weights both processes ended with
    loaded = _crossjem("minilm-l6")
    loaded.load(tmp_path / "model")
    assert loaded.describe()["weights_hash"] == summary["weights_hash"]
    scores = loaded.score(gold_split("dev", 1, 6).lists)
    assert all(s.shape == (6,) and np.isfinite(s).all() for s in scores)

    # one process, same global batches: same losses and dev scores up to float rounding
    alone = (
        _crossjem(tiny_bert, **_distributed_options())
        .fit(gold_split("train", 0), gold_split("dev", 1, 6))
        .to_json()
    )
    assert alone["processes"] == 1
    np.testing.assert_allclose(summary["loss"], alone["loss"], rtol=1e-4)
    np.testing.assert_allclose(summary["dev_AP@10"], alone["dev_AP@10"], atol=1e-6)
    assert summary["skipped_queries"] == alone["skipped_queries"] == 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    _worker(sys.argv[1], sys.argv[2])
