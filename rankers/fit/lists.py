"""The list trainer: monoBERT, CROSS-JEM and RankT5 fine-tuned on whole candidate lists with any
loss of :mod:`rankers.compute.losses` and fixed targets (:mod:`rankers.fit.targets`), on the one
loop of :mod:`rankers.fit.loop`; the options every list ranker shares are declared in
:mod:`rankers.trainconfig`.

Batches are *split*: each process takes an equal contiguous slice of every global batch, so
``train_batch_queries`` lists make one optimisation step whatever the process count; the last,
short batch is padded with zero-weight lists so every process gets a slice. Kept apart from the
loop (:mod:`rankers.fit.loop`), which knows nothing of lists: the list rankers' steps
(:class:`ListSteps`) are one trainer of it among others.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import logging
import math
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.core.trained import ListTraining, TrainingSummary
from bench.data.model import CandidateList, RankingSplit
from rankers.base import (
    Ranker,
    RankerError,
)
from rankers.compute.losses import RankingLoss, get_loss
from rankers.fit.loop import BatchLoss, LoopPlan, train_loop
from rankers.fit.optim import accelerated_device, make_accelerator
from rankers.fit.resume import list_ids
from rankers.fit.targets import (
    TEACHER_CACHE_DIR,
    Targets,
    cap_lists,
    extend_lists,
    training_targets,
)
from rankers.inputs.transfer import upload_along
from rankers.trainconfig import list_config

if TYPE_CHECKING:
    import torch
    from torch import nn

log = logging.getLogger(__name__)

_NO_SIGNAL = "no query in the batch has signal"


# -- data ----------------------------------------------------------------------------------------
class ListBatches:
    """Global batches of list indices, a fresh permutation per epoch (``seed + epoch``).

    The list trainer's ``epoch_batches``; :func:`train_loop` gives each process an equal slice of
    every batch. With ``pad`` the last short batch is filled up to ``batch_size`` with ``-1 - i``
    (list ``i`` again, zero weight): every process then gets a non-empty slice. The epoch is set
    through :attr:`epoch`.
    """

    def __init__(self, n_lists: int, batch_size: int, seed: int, pad: bool) -> None:
        self.n_lists = n_lists
        self.batch_size = batch_size
        self.seed = seed
        self.pad = pad
        self.epoch = 1

    def __len__(self) -> int:
        return math.ceil(self.n_lists / self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        order = list(range(self.n_lists))
        random.Random(self.seed + self.epoch).shuffle(order)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            missing = self.batch_size - len(batch) if self.pad else 0
            batch += [-1 - order[k % len(order)] for k in range(missing)]
            yield batch


@dataclasses.dataclass
class ListBatch:
    """One process's slice of a batch: the ranker's inputs and the padded targets, on the
    ranker's device (``ranker.prepare`` puts them there)."""

    inputs: Any
    targets: torch.Tensor
    #: True for the real items of real (not padding) lists
    mask: torch.Tensor
    lists: list[int]


class ListCollate:
    """List indices (``-1 - i``: padding list ``i``) -> ``ranker.prepare`` inputs + targets with
    their mask."""

    def __init__(self, ranker: Any, lists: Sequence[CandidateList], targets: Sequence[np.ndarray]):
        self.ranker = ranker
        self.lists = lists
        self.targets = targets

    def __call__(self, ids: Sequence[int]) -> ListBatch:
        rows = [i if i >= 0 else -1 - i for i in ids]
        targets, mask = pad_host([self.targets[r] for r in rows], [i >= 0 for i in ids])
        # the targets and their mask ride in the inputs' one host-to-device copy
        with upload_along({"targets": targets, "mask": mask}) as sent:
            inputs = self.ranker.prepare(
                [(self.lists[r].query.text, self.lists[r].texts) for r in rows]
            )
        if not sent:  # a ranker whose prepare() uploads nothing itself
            import torch

            device = self.ranker.device
            sent = {
                "targets": torch.from_numpy(targets).to(device),
                "mask": torch.from_numpy(mask).to(device),
            }
        return ListBatch(inputs, sent["targets"], sent["mask"], list(ids))


def pad_host(
    targets: Sequence[np.ndarray], real: Sequence[bool] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad per-list targets into (B, N_max) float32 and a bool mask (False on padding
    lists), as host arrays."""
    width = max((len(t) for t in targets), default=0)
    values = np.zeros((len(targets), width), dtype=np.float32)
    mask = np.zeros((len(targets), width), dtype=bool)
    for row, t in enumerate(targets):
        values[row, : len(t)] = np.asarray(t, dtype=np.float32)
        mask[row, : len(t)] = True if real is None else bool(real[row])
    return values, mask


def pad_targets(
    targets: Sequence[np.ndarray], real: Sequence[bool] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`pad_host` as CPU tensors."""
    import torch

    values, mask = pad_host(targets, real)
    return torch.from_numpy(values), torch.from_numpy(mask)


#: one micro-batch of a step: (place of the list in the step's slice, first item, end item)
Part = tuple[int, int, int]


def micro_batches(sizes: Sequence[int], most: int, split_lists: bool) -> list[list[Part]]:
    """The lists of a step (``sizes`` items each), in order, cut into micro-batches of at most
    ``most`` items: whole lists side by side, and with ``split_lists`` a longer list in chunks of
    ``most`` (without it a longer list is a micro-batch of its own). One micro-batch holding
    every list when the step fits or ``most`` is 0."""
    if not most or sum(sizes) <= most:
        return [[(k, 0, n) for k, n in enumerate(sizes)]]
    batches: list[list[Part]] = []
    current: list[Part] = []
    held = 0
    for k, n in enumerate(sizes):
        if current and (held + n > most or (split_lists and n > most)):
            batches.append(current)
            current, held = [], 0
        if split_lists and n > most:
            batches.extend([(k, start, min(start + most, n))] for start in range(0, n, most))
            continue
        current.append((k, 0, n))
        held += n
    if current:
        batches.append(current)
    return batches


@dataclasses.dataclass
class MicroPass:
    """One micro-batch of a step: its prepared inputs, its parts and the random state its
    scoring pass started from (the backward pass replays it: the same dropout masks)."""

    inputs: Any
    parts: list[Part]
    rng: Any


def rng_state(device: str) -> tuple[Any, Any]:
    """torch's CPU random state and, on CUDA, the device's."""
    import torch

    cuda = torch.cuda.get_rng_state(device) if device.startswith("cuda") else None
    return torch.get_rng_state(), cuda


def set_rng_state(device: str, state: tuple[Any, Any]) -> None:
    """Restore a state of :func:`rng_state`."""
    import torch

    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def signal_rows(loss: RankingLoss, targets: Sequence[np.ndarray], chunk: int = 64) -> np.ndarray:
    """Per list, whether ``loss`` finds signal in its targets (on the host, ``chunk`` at once)."""
    out = [
        loss.signal_rows(*pad_targets(targets[start : start + chunk])).numpy()
        for start in range(0, len(targets), chunk)
    ]
    return np.concatenate(out) if out else np.zeros(0, dtype=bool)


def check_signal(loss: RankingLoss, targets: Sequence[np.ndarray], chunk: int = 64) -> bool:
    """True when ``loss`` finds signal in some list (its validity depends on targets only)."""
    import torch

    for start in range(0, len(targets), chunk):
        values, mask = pad_targets(targets[start : start + chunk])
        try:
            loss.compute(torch.zeros_like(values), values, mask)
        except ValueError as exc:
            if _NO_SIGNAL not in str(exc):
                raise
            continue
        return True
    return False


# -- the list trainer ----------------------------------------------------------------------------
class ListSteps:
    """The :class:`Trainable` of the list rankers (monoBERT, CROSS-JEM, RankT5): their
    ``prepare(lists)`` and ``forward(batch) -> (logits, mask)`` with any loss of
    :mod:`rankers.compute.losses` on whole candidate lists and fixed targets."""

    def __init__(
        self,
        ranker: Any,
        lists: Sequence[CandidateList],
        targets: Targets,
        loss_fn: RankingLoss,
        processes: int,
    ) -> None:
        cfg = list_config(ranker)
        self.ranker, self.loss_fn = ranker, loss_fn
        self.collate = ListCollate(ranker, lists, targets.values)
        self.micro_items = cfg.train_micro_items
        # a pointwise ranker scores each item alone, so a long list may be cut into chunks
        self.split_lists = bool(getattr(ranker, "pointwise", False))
        # several processes: the last, short batch is padded with zero-weight lists
        self.batches = ListBatches(len(lists), cfg.train_batch_queries, cfg.seed, processes > 1)
        # which lists carry signal, from the host targets once (range checked there too): a
        # step's loss then needs no read of device values to count them
        self.signal = signal_rows(loss_fn, targets.values)

    def training_module(self) -> nn.Module:
        return self.ranker.module

    def epoch_batches(self, train: RankingSplit, epoch: int) -> list[list[int]]:
        self.batches.epoch = epoch
        return list(self.batches)

    def batch_loss(self, batch: list[int], module: nn.Module) -> BatchLoss:
        rows = [i if i >= 0 else -1 - i for i in batch]
        sizes = [len(self.collate.lists[r]) for r in rows]
        micro = micro_batches(sizes, self.micro_items, self.split_lists)
        if len(micro) > 1:
            return self.micro_loss(batch, module, micro)
        inputs = self.collate(batch)
        forward = _forward(self.ranker, module, self.ranker.module)
        logits, mask = forward(inputs.inputs)
        if logits.shape != inputs.targets.shape:
            raise RankerError(
                f"forward returned logits of shape {tuple(logits.shape)} for targets of shape "
                f"{tuple(inputs.targets.shape)}"
            )
        real = sum(1 for i in batch if i >= 0)
        used = sum(int(self.signal[i]) for i in batch if i >= 0)
        if not used:
            # e.g. only lists without positives under ce: this slice adds nothing, but still
            # takes part in the backward pass (DDP reduces gradients of every process together)
            return BatchLoss(logits.sum() * 0.0, 0, real)
        # the forward mask marks each list's items, as the targets' mask does: same validity
        value = self.loss_fn.compute(logits.float(), inputs.targets, mask & inputs.mask, used)
        return BatchLoss(value.loss, value.used, real)

    def micro_loss(self, batch: list[int], module: nn.Module, micro: list[list[Part]]) -> BatchLoss:
        """The loss of a step too large for one pass, and its backward in ``micro`` batches.

        Scores first: each micro-batch is scored without a graph (its random state kept), the
        loss of the whole slice is taken on those scores as in one pass, and its backward runs
        one micro-batch at a time: scored again from the same random state (the same dropout
        masks), then back-propagated with the loss's gradient for its scores. The gradients
        add up to the one-pass gradient (up to summation order) while one micro-batch's
        activations are held at a time; the extra cost is a pass without a graph. Under DDP
        the gradients are reduced once, with the last micro-batch."""
        import contextlib

        import torch

        ranker, device = self.ranker, self.ranker.device
        rows = [i if i >= 0 else -1 - i for i in batch]
        host_targets, host_mask = pad_host(
            [self.collate.targets[r] for r in rows], [i >= 0 for i in batch]
        )
        targets = torch.from_numpy(host_targets).to(device)
        mask = torch.from_numpy(host_mask).to(device)
        forward = _forward(ranker, module, ranker.module)
        scores = torch.zeros(targets.shape, dtype=torch.float32, device=device)
        passes = []
        with torch.no_grad():
            for parts in micro:
                lists = [self.collate.lists[rows[k]] for k, _, _ in parts]
                inputs = ranker.prepare(
                    [
                        (lists[j].query.text, lists[j].texts[a:b])
                        for j, (_, a, b) in enumerate(parts)
                    ]
                )
                passes.append(MicroPass(inputs, parts, rng_state(device)))
                logits, _ = forward(inputs)
                for j, (k, a, b) in enumerate(parts):
                    scores[k, a:b] = logits[j, : b - a].float()
        real = sum(1 for i in batch if i >= 0)
        used = sum(int(self.signal[i]) for i in batch if i >= 0)
        scores.requires_grad_(True)
        if used:
            loss = self.loss_fn.compute(scores, targets, mask, used).loss
        else:  # no signal: a zero loss whose backward still takes part under DDP
            loss = scores.sum() * 0.0

        def backward(weight: float, run: Callable[[torch.Tensor], None]) -> None:
            (grad,) = torch.autograd.grad(loss * weight, scores)
            after = rng_state(device)
            for n, step in enumerate(passes):
                set_rng_state(device, step.rng)
                last = n == len(passes) - 1
                no_sync = getattr(module, "no_sync", None)
                with contextlib.nullcontext() if last or no_sync is None else no_sync():
                    logits, _ = forward(step.inputs)
                    weights = torch.zeros_like(logits, dtype=torch.float32)
                    for j, (k, a, b) in enumerate(step.parts):
                        weights[j, : b - a] = grad[k, a:b]
                    run((logits.float() * weights).sum())
            set_rng_state(device, after)

        return BatchLoss(loss, used, real, backward)


def fit_lists(
    ranker: Any,
    train: RankingSplit,
    dev: RankingSplit | None = None,
    teacher: Ranker | None = None,
    *,
    work_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    on_checkpoint: Callable[[dict[str, int]], None] | None = None,
) -> TrainingSummary:
    """Fine-tune ``ranker`` in place on whole candidate lists; returns the training summary.

    ``work_dir`` (default ``ranker.work_dir``) holds the resumable checkpoint; ``cache_dir``
    (default ``work_dir/../teacher-scores``) the teacher scores. ``on_checkpoint`` is called on
    every process after each published checkpoint with ``{"epoch", "step"}``.
    """
    cfg = list_config(ranker)
    loss_fn = get_loss(cfg.loss)
    lists, given = prepared_lists(ranker, train)
    if work_dir is None:
        work_dir = getattr(ranker, "work_dir", None)
    work = Path(work_dir) if work_dir is not None else None
    if cache_dir is None and work is not None:
        cache_dir = work.parent / TEACHER_CACHE_DIR

    accelerator = make_accelerator(ranker.device, cfg.train_dtype)
    world = accelerator.num_processes
    if cfg.train_batch_queries % world:
        raise RankerError(
            f"{ranker.name}: train_batch_queries={cfg.train_batch_queries} must be a multiple of "
            f"the {world} training processes (each takes an equal slice of a batch)"
        )
    # under torchrun on CPU Accelerate says "cpu:0"; keep the plain name the rest of the code uses
    ranker.device = accelerated_device(accelerator)

    path = Path(cache_dir) if cache_dir is not None else None
    # every process loads the teacher and scores its shard of the lists; all get the targets
    targets: Targets = training_targets(ranker, train, lists, teacher, path)
    if not check_signal(loss_fn, targets.values):
        raise RankerError(
            f"{ranker.name}: loss {cfg.loss} finds no signal in any list of "
            f"{train.dataset}/{train.split} ({targets.source}): {loss_fn.no_signal}"
        )
    plan = LoopPlan.of(
        cfg,
        warmup_ratio=cfg.warmup_ratio,
        data={"train": list_ids(lists), "targets": [targets.source, targets_hash(targets)]},
        describe=(
            f"{len(lists)} lists, {cfg.train_batch_queries} a step, loss {cfg.loss} on "
            f"{targets.source}"
        ),
        distributed=True,
    )
    steps = ListSteps(ranker, lists, targets, loss_fn, world)
    summary = train_loop(
        ranker,
        steps,
        train,
        dev,
        plan,
        accelerator=accelerator,
        work_dir=work,
        on_checkpoint=on_checkpoint,
    )
    summary.lists = ListTraining(
        loss_name=cfg.loss,
        targets=targets.source,
        teacher=targets.teacher,
        train_queries=len(lists),
        train_items=sum(len(cl) for cl in lists),
        train_items_given=given,
        train_batch_queries=cfg.train_batch_queries,
    )
    return summary


def prepared_lists(ranker: Any, train: RankingSplit) -> tuple[list[CandidateList], int]:
    """The non-empty train lists as the list trainer trains on them, and the items they were
    given: grown to ``train_list_size`` items with BM25 negatives (an encoder ranker's option;
    RankT5 cuts its lists itself instead), then cut to ``train_max_items`` (positives and a
    seeded sample of negatives), each change logged. Checked before any model or teacher work."""
    cfg = list_config(ranker)
    lists = [cl for cl in train.lists if len(cl)]
    if not lists:
        raise RankerError(f"train split {train.dataset}/{train.split} has no candidate lists")
    given = sum(len(cl) for cl in lists)
    size = int(getattr(cfg, "train_list_size", 0) or 0)
    if size:
        lists = extend_lists(train, lists, size)
        log.info(
            "%s: train lists grown to %d items with BM25 negatives: %.1f -> %.1f items a list",
            ranker.name,
            size,
            given / len(lists),
            sum(len(cl) for cl in lists) / len(lists),
        )
    cap = int(getattr(cfg, "train_max_items", 0) or 0)
    longest = max(len(cl) for cl in lists)
    if cap and longest > cap:
        cut = sum(1 for cl in lists if len(cl) > cap)
        lists = cap_lists(lists, train.qrels, cap, cfg.seed)
        log.info(
            "%s: %d of %d train lists (up to %d items) cut to %d items: their positives and a "
            "seeded sample of negatives (option train_max_items)",
            ranker.name,
            cut,
            len(lists),
            longest,
            cap,
        )
    log.info(
        "%s: the largest training step holds at most %d items (%d lists of up to %d)",
        ranker.name,
        cfg.train_batch_queries * max(len(cl) for cl in lists),
        cfg.train_batch_queries,
        max(len(cl) for cl in lists),
    )
    return lists, given


def targets_hash(targets: Targets) -> str:
    """SHA-256 of the target values (float64, list after list), for the checkpoint key: other
    targets (another teacher's scores) must not resume this training."""
    digest = hashlib.sha256()
    for t in targets.values:
        digest.update(np.asarray(t, dtype=np.float64).tobytes())
    return digest.hexdigest()


def _forward(ranker: Any, model: nn.Module, module: nn.Module) -> Callable[[Any], Any]:
    """``ranker.forward`` through the prepared model: DDP only syncs gradients of calls to it."""
    if model is module:  # one process: prepare() returned the module itself
        return ranker.forward
    if "module" not in inspect.signature(ranker.forward).parameters:
        raise RankerError(
            f"{ranker.name}: forward(batch) takes no module= argument, so it cannot run through "
            "the distributed wrapper; train it in one process"
        )
    return functools.partial(ranker.forward, module=model)
