"""Resumable training state: the checkpointed progress of one run, its key, publishing and
best-epoch selection (the bookkeeping half of :func:`rankers.fit.loop.train_loop`).

With a work directory the full training state - model, optimizer, scheduler, every process's RNG,
epoch/step, history, the best weights so far and their dev score, and the ranker's own training
state - is saved to ``work_dir/checkpoint/`` at the end of every epoch and every
``checkpoint_steps`` steps. A state is written to a temporary folder, renamed, then published by
atomically replacing ``latest.json``; a crash at any point leaves the previous state usable. Kept
apart from the loop (:mod:`rankers.fit.loop`) so the loop reads as its steps, with the bookkeeping
behind one object (:class:`Resumable`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core.io import atomic_write_json
from bench.core.trained import SELECTION_MEASURE
from bench.data.model import CandidateList, RankingSplit
from rankers.base import Ranker, RankerError, Role

if TYPE_CHECKING:
    from accelerate import Accelerator, PartialState
    from torch import nn

log = logging.getLogger(__name__)

#: resumable training state, inside the work directory
CHECKPOINT_DIR = "checkpoint"
#: the published state of CHECKPOINT_DIR (replaced atomically)
LATEST_FILE = "latest.json"


@dataclasses.dataclass
class Progress:
    """Everything besides model/optimizer/scheduler/RNG a resumed run needs (checkpointed)."""

    epochs_done: int = 0
    #: batches of the current epoch already trained
    batches_done: int = 0
    #: batches trained in all epochs
    step: int = 0
    epoch_losses: list[float] = dataclasses.field(default_factory=list)
    epoch_skipped: int = 0
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    best_epoch: int = 0
    best_score: float = -math.inf
    best_state: dict[str, Any] | None = None
    dev_before: float | None = None
    #: training seconds up to the last checkpoint, over all runs
    seconds: float = 0.0

    def state_dict(self) -> dict[str, Any]:
        state = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.best_epoch == self.epochs_done and self.batches_done == 0:
            state["best_state"] = None  # the checkpoint's model weights are the best ones
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)


def checkpoint_key(
    ranker: Ranker,
    data: dict[str, Any],
    dev: RankingSplit | None,
    processes: int,
    mixed_precision: str,
) -> str:
    """What a checkpoint must have been trained with to be resumed: the ranker's training config,
    ``data`` (whatever defines the training examples and targets), dev and the process setup."""
    return digest(
        {
            "ranker": ranker.name,
            "config": ranker.config.to_dict(Role.TRAINING),
            **data,
            "dev": None if dev is None else [dev.checksum, sorted(dev.qrels.items())],
            "processes": processes,
            "mixed_precision": mixed_precision,
        }
    )


def list_ids(lists: Sequence[CandidateList]) -> list[list[Any]]:
    """The (qid, docids) of each list: what a checkpoint key records of the training lists."""
    return [[cl.query.qid, cl.docids] for cl in lists]


def split_key(split: RankingSplit) -> dict[str, Any]:
    """The checkpoint-key data of a trainer whose examples come from the lists and qrels (ColBERT's
    triples, the dual encoders' pairs): list ids, the split checksum, qrels and relevance level."""
    return {
        "train": list_ids(split.lists),
        "qrels": [split.checksum, sorted(split.qrels.items()), split.relevance_level],
    }


def find_checkpoint(folder: Path, key: str) -> tuple[Path, dict[str, Any]] | None:
    """The published state in ``folder`` if it was made with ``key``; None (logged) otherwise."""
    latest = folder / LATEST_FILE
    if not latest.is_file():
        return None
    try:
        meta = json.loads(latest.read_text())
        state = folder / str(meta["state"])
    except (OSError, ValueError, KeyError) as exc:
        log.warning("%s is unreadable (%s): training from scratch", latest, exc)
        return None
    if meta.get("key") != key:
        log.warning(
            "%s was saved with other settings, data or targets: training from scratch", latest
        )
        return None
    if not state.is_dir():
        log.warning("%s names %s, which is missing: training from scratch", latest, state)
        return None
    return state, meta


def wait_for_everyone(accelerator: Accelerator | PartialState) -> None:
    """A barrier across the training processes.

    Accelerate's ``wait_for_everyone`` passes ``device_ids=[local rank]`` to
    ``torch.distributed.barrier``, which then allocates its tensor on ``cuda:<rank>`` whenever
    CUDA is visible, even for a gloo (CPU) process group: two CPU processes on a one-GPU machine
    fail at the first barrier (rank 1 has no ``cuda:1``). CPU training waits with a plain
    barrier, which torch runs on the CPU for gloo groups."""
    if accelerator.num_processes <= 1:
        return
    if accelerator.device.type == "cpu":
        import torch.distributed

        torch.distributed.barrier()
    else:
        accelerator.wait_for_everyone()


def save_checkpoint(accelerator: Accelerator, folder: Path, key: str, progress: Progress) -> Path:
    """Save the full state (all processes), publish it atomically, drop older states."""
    name = f"epoch{progress.epochs_done:03d}-step{progress.step:07d}"
    tmp, final = folder / f"{name}.tmp", folder / name
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    wait_for_everyone(accelerator)
    accelerator.save_state(str(tmp))
    wait_for_everyone(accelerator)
    if accelerator.is_main_process:
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        meta = {"key": key, "state": name, "epoch": progress.epochs_done, "step": progress.step}
        atomic_write_json(folder / LATEST_FILE, meta)
        for old in folder.iterdir():
            if old.is_dir() and old.name != name:
                shutil.rmtree(old, ignore_errors=True)
        log.info("checkpoint: %s", final)
    wait_for_everyone(accelerator)
    return final


class Resumable:
    """The checkpointed progress of one training run: resume, saves, best-epoch selection.

    The bookkeeping half of :func:`train_loop`. Create it after ``accelerator.prepare`` and call
    :meth:`resume` before the first step; then :meth:`save` whenever a mid-epoch checkpoint is
    due, :meth:`end_epoch` after each epoch's dev evaluation, and :meth:`restore_best` at the
    end. Without a work directory nothing is saved.
    """

    def __init__(
        self,
        accelerator: Accelerator,
        module: nn.Module,
        work_dir: str | Path | None,
        key: str,
        name: str,
        on_checkpoint: Callable[[dict[str, int]], None] | None = None,
    ) -> None:
        self.accelerator, self.module, self.key, self.name = accelerator, module, key, name
        self.folder = Path(work_dir) / CHECKPOINT_DIR if work_dir is not None else None
        self.on_checkpoint = on_checkpoint
        self.progress = Progress()
        accelerator.register_for_checkpointing(self.progress)
        #: {"epoch", "step"} of the state this run continued from; None: from scratch
        self.resumed_from: dict[str, int] | None = None
        self._start, self._seconds_before = time.perf_counter(), 0.0

    def resume(self) -> bool:
        """Load the published state made with this key, if any (True), and start the clock."""
        found = find_checkpoint(self.folder, self.key) if self.folder is not None else None
        if found is not None:
            self.accelerator.load_state(str(found[0]))
            progress = self.progress
            if progress.best_epoch and progress.best_state is None:
                progress.best_state = _snapshot(self.module)
            self.resumed_from = {"epoch": progress.epochs_done, "step": progress.step}
            if self.accelerator.is_main_process:
                log.info("%s: resuming from %s (%s)", self.name, found[0], self.resumed_from)
        self._start, self._seconds_before = time.perf_counter(), self.progress.seconds
        return found is not None

    @property
    def seconds(self) -> float:
        """Training seconds so far, over all runs of this key."""
        return self._seconds_before + time.perf_counter() - self._start

    def save(self) -> None:
        """Publish the full state (no-op without a work directory)."""
        self.progress.seconds = self.seconds
        if self.folder is not None:
            save_checkpoint(self.accelerator, self.folder, self.key, self.progress)
            if self.on_checkpoint is not None:
                self.on_checkpoint({"epoch": self.progress.epochs_done, "step": self.progress.step})

    def end_epoch(self, epoch: int, entry: dict[str, Any], dev_score: float | None) -> None:
        """Record ``epoch``, keep its weights if its dev score is the best so far, checkpoint.

        No dev: the last epoch wins; ties keep the earlier epoch.
        """
        progress = self.progress
        progress.history.append(entry)
        if progress.best_epoch == 0 or dev_score is None or dev_score > progress.best_score:
            progress.best_epoch = epoch
            progress.best_score = dev_score if dev_score is not None else -math.inf
            progress.best_state = _snapshot(self.module)
        progress.epochs_done, progress.batches_done = epoch, 0
        progress.epoch_losses, progress.epoch_skipped = [], 0
        self.save()

    def summary(self) -> dict[str, Any]:
        """The :class:`bench.core.trained.TrainingSummary` fields every trainer reports: epochs
        kept, dev scores, losses, and where and for how long it ran."""
        progress, dev = self.progress, f"dev_{SELECTION_MEASURE}"
        return {
            "best_epoch": progress.best_epoch,
            "dev_scores": [h[dev] for h in progress.history],
            "dev_before": progress.dev_before,
            "loss": [h["loss"] for h in progress.history],
            "resumed_from": self.resumed_from,
            "checkpoint": str(self.folder) if self.folder is not None else None,
            "seconds": round(self.progress.seconds, 2),
        }

    def restore_best(self) -> None:
        """Load the best epoch's weights into the module (eval mode) and stop the clock."""
        self.progress.seconds = self.seconds
        if self.progress.best_state is None:
            raise RankerError(f"{self.name}: training ended without a finished epoch")
        self.module.load_state_dict(self.progress.best_state)
        self.module.eval()


def _snapshot(module: nn.Module) -> dict[str, Any]:
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


def digest(data: Any) -> str:
    """First 16 hex of the SHA-256 of ``data`` as canonical JSON."""
    text = json.dumps(data, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
