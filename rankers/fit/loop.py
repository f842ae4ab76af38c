"""One training loop for every trainable ranker.

**The loop** (:func:`train_loop`). A trainer declares its training step through the small
:class:`Trainable` protocol - ``training_module()``, ``epoch_batches(train, epoch)``,
``batch_loss(batch, module)``, optionally ``on_epoch_start(epoch)`` and a
``training_state()``/``load_training_state()`` pair - and its settings as a :class:`LoopPlan`.
Every in-tree ranker hands the loop a steps object that implements it: monoBERT, CROSS-JEM and
RankT5 :class:`rankers.fit.lists.ListSteps`, ColBERT :class:`rankers.fit.colbert.ColBERTSteps`
(colbert-ai's objective on triples), the dual encoders DPR and ANCE
:class:`rankers.fit.dense.DenseSteps` (pairs with hard negatives); a ranker kept elsewhere may
implement it itself. Everything around the step is shared, so it behaves the same for all of
them: AdamW (no decay on biases and LayerNorm unless the plan says otherwise), a linear
warm-up/decay or constant schedule, gradient clipping, dev AP@10 through ``ranker.score`` after
every epoch, the best epoch's weights kept, checkpoints and resume, and the training summary. The
loop is named steps on one :class:`LoopState`: :func:`setup_loop`, then per epoch
:func:`run_epoch` (its :func:`train_step` calls) and :func:`end_epoch`, then :func:`summarise`.

**Accelerate.** The same loop runs on CPU, one GPU or many GPUs/nodes (``accelerate launch``):
the model, optimizer and scheduler go through ``Accelerator.prepare``; bf16/fp16 autocast follows
the list rankers' ``dtype`` on CUDA only (the others train in float32). Batches are *split*: each
process takes an equal contiguous slice of every global batch, so ``train_batch_queries`` lists
make one optimisation step whatever the process count. Each process's loss is weighted by its
share of the examples that carry signal, so the averaged gradient is the gradient of the global
batch mean - the same optimisation as one process, but not the same model: each process draws
its own dropout masks (and sums in another order), so a data-parallel model is cached under its
own key (``processes`` in the training key, :mod:`bench.execution.scale`). The list trainer pads the
last, short batch with zero-weight lists so every process gets a slice; ColBERT and the dual
encoders train in one process (``Ranker.distributed_training`` says which). Dev scoring and teacher
scoring are sharded over the processes like `bench run`'s scoring (:mod:`bench.core.shard`); logging
and evaluation run on the main process and are broadcast.

**Parts.** The loop and optimisation live here; the resumable state and checkpoints in
:mod:`rankers.fit.resume`, teacher and qrels targets in :mod:`rankers.fit.targets`, the list trainer
(:func:`rankers.fit.lists.fit_lists`) and the list rankers' steps in :mod:`rankers.fit.lists` (their
shared options in :mod:`rankers.trainconfig`), the dual encoders' and ColBERT's steps in
:mod:`rankers.fit.dense` and :mod:`rankers.fit.colbert`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from bench.core.trained import TrainingSummary
from bench.data.model import RankingSplit
from bench.results.metrics import build_run, evaluate
from rankers.base import Ranker, RankerError, TrainingConfig
from rankers.fit.optim import NO_DECAY, adamw, make_accelerator
from rankers.fit.resume import SELECTION_MEASURE, Progress, Resumable, checkpoint_key

if TYPE_CHECKING:
    import torch
    from accelerate import Accelerator
    from torch import nn

log = logging.getLogger(__name__)

#: training losses stay on the device and are read this many steps at a time (and at each epoch's
#: end and checkpoint): a read per step makes the host wait for the GPU before packing the next
#: batch, so host preparation never overlaps the device's work
LOSS_READ_STEPS = 16


def dev_per_query(
    ranker: Ranker, dev: RankingSplit | None, scores: Sequence[Any] | None = None
) -> dict[str, float] | None:
    """Dev AP@10 of each query with the current weights (or of ``scores``, one array per dev
    list, when given); None without a dev split."""
    if dev is None or not dev.lists:
        return None
    run = build_run(dev.lists, ranker.score(dev.lists) if scores is None else scores)
    ev = evaluate(dev.qrels, run, dev.relevance_level, measures=(SELECTION_MEASURE,))
    return {q: v[SELECTION_MEASURE] for q, v in ev.per_query.items()}


def sharded_dev_per_query(ranker: Ranker, dev: RankingSplit | None) -> dict[str, float] | None:
    """:func:`dev_per_query` on every process of a launch: each scores its shard of the dev
    lists (balanced by candidate count, :func:`bench.core.shard.score_sharded`) and the main one
    evaluates them all; the others get None. The weights are the same on every process (DDP),
    so the shards make the one-process scores: the values do not depend on the process count."""
    from bench.core.shard import score_sharded

    if dev is None or not dev.lists:
        return None
    scores = score_sharded(dev.lists, [len(cl) for cl in dev.lists], ranker.score)
    return None if scores is None else dev_per_query(ranker, dev, scores)


def dev_score(ranker: Ranker, dev: RankingSplit | None) -> float | None:
    """Dev AP@10 with the current weights (the mean over the dev queries); None without a dev
    split. Called on every process of a launch (:func:`sharded_dev_per_query`); all get it."""
    from bench.core.shard import from_main

    values = sharded_dev_per_query(ranker, dev)
    return from_main(None if values is None else sum(values.values()) / max(len(values), 1))


# -- the loop ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BatchLoss:
    """One process's loss for its slice of a step, with what the loop needs to combine slices.

    ``loss`` is the mean over this slice's examples that carry signal; ``used`` counts them and
    ``real`` counts the slice's real (not padding) examples. The loop weights each process's loss
    by its share of ``used`` so the averaged gradient is the global batch mean, and skips the
    optimizer step when no process has signal. A plain tensor from ``batch_loss`` means every
    example counts (``used = real = 1``: the weight is then exactly 1 in one process).
    """

    loss: torch.Tensor
    used: int
    real: int
    #: set by a step that runs its own backward passes (micro-batches, whose graphs are not all
    #: held at once): called with the weight of this slice's loss and the loop's backward
    #: (``accelerator.backward``, which scales a float16 loss) instead of a backward of ``loss``
    backward: Callable[[float, Callable[[torch.Tensor], None]], None] | None = None


@runtime_checkable
class Trainable(Protocol):
    """The training step a trainer declares; :func:`train_loop` owns everything around it.

    In the manner of lightning-ir's one training step with a loss hook, kept apart from the
    model: the trainer (an in-tree ranker's steps object in this package, or a ranker kept
    elsewhere that implements it itself) says what module is trained, which batches an epoch has
    and what one batch's loss is; the loop does the optimiser, schedule, Accelerate, dev scoring,
    best-epoch selection, checkpoints and resume the same way for every ranker.
    ``epoch_batches`` must depend on (seed, epoch) only, so a resumed run sees the same batches
    and skips the ones already trained. Optional hooks, looked up by name:
    ``on_epoch_start(epoch)`` before a fresh (not resumed mid-way) epoch, and
    ``training_state()``/``load_training_state(state)`` for state the trainer keeps across epochs
    (the dual encoders' mined negatives), saved with every checkpoint.
    """

    def training_module(self) -> nn.Module:
        """The module the optimiser trains and Accelerate prepares (loaded if need be)."""
        ...

    def epoch_batches(self, train: RankingSplit, epoch: int) -> Sequence[Any]:
        """Epoch ``epoch``'s global batches, in order (a function of the seed and the epoch)."""
        ...

    def batch_loss(self, batch: Any, module: nn.Module) -> torch.Tensor | BatchLoss:
        """The loss of one batch (this process's slice of it) through ``module``, the prepared
        module (a DDP wrapper under several processes: gradients sync only through it)."""
        ...


@dataclasses.dataclass(frozen=True)
class LoopPlan:
    """A trainer's settings for :func:`train_loop`, read from its config by the ranker."""

    epochs: int
    lr: float
    weight_decay: float
    max_grad_norm: float
    seed: int
    #: ``linear`` (warm-up, then decay to 0) or ``constant``
    schedule: str = "linear"
    #: warm-up as a share of all steps (``warmup_steps`` wins when set)
    warmup_ratio: float = 0.0
    warmup_steps: int | None = None
    #: parameter-name endings without weight decay (empty: decay everything)
    no_decay: tuple[str, ...] = NO_DECAY
    #: also checkpoint every N steps (0: at epoch ends only)
    checkpoint_steps: int = 0
    #: stop after this many steps in all (None: every epoch)
    max_steps: int | None = None
    #: at least this many optimizer steps: more epochs when the train set is small (0: off)
    min_steps: int = 0
    #: stop after this many epochs without a better dev score (0: run every epoch)
    patience: int = 0
    #: what defines the training examples and targets, for the checkpoint key
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: one line for the log: what is trained on what
    describe: str = ""
    #: False: refuse to run under several processes (the trainer has no slicing of its own)
    distributed: bool = False

    @classmethod
    def of(cls, cfg: TrainingConfig, **settings: Any) -> LoopPlan:
        """A plan from the options every trainable config shares (:class:`TrainingConfig`:
        epochs, lr, weight_decay, max_grad_norm, seed, min_steps, patience) and its
        checkpoint_steps if it has that option, then ``settings``."""
        shared = ("epochs", "lr", "weight_decay", "max_grad_norm", "seed", "min_steps", "patience")
        plan: dict[str, Any] = {name: getattr(cfg, name) for name in shared}
        plan["checkpoint_steps"] = int(getattr(cfg, "checkpoint_steps", 0) or 0)
        return cls(**{**plan, **settings})


def planned_epochs(plan: LoopPlan, steps_per_epoch: int) -> int:
    """``plan.epochs``, raised so that at least ``plan.min_steps`` optimizer steps are taken.

    Why: with a few dozen train queries, 3 epochs are a few dozen steps, too few to move a
    pre-trained encoder off its starting point; the dev split (with ``patience``) then picks the
    epoch, so the extra epochs cost time but cannot select a worse one on dev."""
    if plan.min_steps <= 0 or steps_per_epoch <= 0:
        return plan.epochs
    return max(plan.epochs, math.ceil(plan.min_steps / steps_per_epoch))


def out_of_patience(plan: LoopPlan, progress: Progress, has_dev: bool) -> bool:
    """Whether ``plan.patience`` epochs have passed without a better dev score (early stop)."""
    if plan.patience <= 0 or not has_dev or progress.best_epoch == 0:
        return False
    return progress.epochs_done - progress.best_epoch >= plan.patience


@dataclasses.dataclass
class LoopState:
    """One training run between its setup (:func:`setup_loop`), its epochs (:func:`run_epoch`,
    :func:`end_epoch`) and its summary (:func:`summarise`): what the steps train and with what,
    and the resumable progress (``run.progress``)."""

    ranker: Ranker
    steps: Trainable
    train: RankingSplit
    dev: RankingSplit | None
    plan: LoopPlan
    accelerator: Accelerator
    #: the module the steps train, and its prepared form (a DDP wrapper under several processes)
    module: nn.Module
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    run: Resumable
    epochs: int
    steps_per_epoch: int
    #: optimizer steps planned in all (``plan.max_steps`` applied)
    total: int
    warmup: int

    @property
    def progress(self) -> Progress:
        return self.run.progress

    @property
    def main(self) -> bool:
        return bool(self.accelerator.is_main_process)

    def announce(self) -> None:
        """One log line on the main process: what is trained on what, for how long, how."""
        if self.main:
            log.info(
                "%s fine-tuning: %s; %d epochs x %d steps (%d in all), %d process(es), "
                "mixed precision %s",
                self.ranker.name,
                self.plan.describe,
                self.epochs,
                self.steps_per_epoch,
                self.total,
                self.accelerator.num_processes,
                self.accelerator.mixed_precision,
            )


def train_loop(
    ranker: Ranker,
    steps: Trainable,
    train_split: RankingSplit,
    dev: RankingSplit | None,
    plan: LoopPlan,
    *,
    accelerator: Accelerator | None = None,
    work_dir: str | Path | None = None,
    on_checkpoint: Callable[[dict[str, int]], None] | None = None,
) -> TrainingSummary:
    """Train ``steps`` in place; returns the shared training summary.

    ``steps`` is a ranker's steps object (:class:`rankers.fit.lists.ListSteps`,
    :class:`rankers.fit.dense.DenseSteps`, :class:`rankers.fit.colbert.ColBERTSteps`) or, for a
    ranker kept elsewhere, the ranker itself. One loop for every trainable ranker: the setup
    (:func:`setup_loop`: seed, AdamW and schedule, ``accelerator.prepare``, resume from
    ``work_dir``'s checkpoint), then per epoch :func:`run_epoch` (``on_epoch_start``, the steps -
    each process takes an equal contiguous slice of every global batch, as Accelerate's split
    batches do - and checkpoints every ``plan.checkpoint_steps`` steps) and :func:`end_epoch` (dev
    AP@10 through ``ranker.score``, the epoch-end checkpoint), and at the end :func:`summarise`
    (the best epoch's weights restored). Without ``accelerator``, one is made in float32 on the
    ranker's device. ``on_checkpoint`` is called on every process after each published
    checkpoint with ``{"epoch", "step"}``. The ranker scores (dev) in its training precision
    (:func:`rankers.compute.precision.training_precision`): dev selects the epoch, so it must not
    depend on the runtime-only ``dtype``.
    """
    from bench.core.device import deterministic_kernels
    from bench.core.progress import progress_bar
    from rankers.compute.precision import training_precision

    with training_precision(ranker.config):
        state = setup_loop(
            ranker,
            steps,
            train_split,
            dev,
            plan,
            accelerator=accelerator,
            work_dir=work_dir,
            on_checkpoint=on_checkpoint,
        )
        bar = progress_bar(
            state.total,
            f"{ranker.name} fit",
            "step",
            initial=state.progress.step,
            enabled=state.main,
        )
        # the same weights whatever else runs on the machine (CPU kernels that add in thread
        # order run in index order)
        with bar, deterministic_kernels(ranker.device):
            for epoch in range(state.progress.epochs_done + 1, state.epochs + 1):
                if stops_before_epoch(state):
                    break
                run_epoch(state, epoch, bar)
                end_epoch(state, epoch)
        return summarise(state)


def setup_loop(
    ranker: Ranker,
    steps: Trainable,
    train: RankingSplit,
    dev: RankingSplit | None,
    plan: LoopPlan,
    *,
    accelerator: Accelerator | None = None,
    work_dir: str | Path | None = None,
    on_checkpoint: Callable[[dict[str, int]], None] | None = None,
) -> LoopState:
    """Everything before the first step: the checks, the seed, the epochs and steps planned, AdamW
    and its schedule through ``accelerator.prepare``, the resumable state registered, then either
    the resumed checkpoint or the dev score before training (every process scores its shard)."""
    from bench.core.device import seed_everything

    accelerator = _checked_accelerator(ranker, steps, plan, accelerator)
    seed_everything(plan.seed + accelerator.process_index)
    module = steps.training_module()
    steps_per_epoch = len(steps.epoch_batches(train, 1))
    epochs, total, warmup = _schedule(ranker, plan, steps_per_epoch, accelerator.is_main_process)
    optimizer, scheduler = adamw(
        module, plan.lr, plan.weight_decay, total, warmup, plan.schedule, plan.no_decay
    )
    model, optimizer, scheduler = accelerator.prepare(module, optimizer, scheduler)
    if accelerator.unwrap_model(model) is not module:
        raise RankerError(f"{ranker.name}: Accelerate returned another module than it was given")
    world = accelerator.num_processes
    key = checkpoint_key(ranker, plan.data, dev, world, accelerator.mixed_precision)
    work = work_dir if work_dir is not None else ranker.work_dir
    run = Resumable(accelerator, module, work, key, ranker.name, on_checkpoint)
    if callable(getattr(steps, "training_state", None)):
        # after Progress, so every checkpoint holds them in the same order
        accelerator.register_for_checkpointing(_HookState(steps))
    if not run.resume():
        run.progress.dev_before = dev_score(ranker, dev)  # every process scores its shard
    state = LoopState(
        ranker=ranker,
        steps=steps,
        train=train,
        dev=dev,
        plan=plan,
        accelerator=accelerator,
        module=module,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        run=run,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        total=total,
        warmup=warmup,
    )
    state.announce()
    return state


def _schedule(
    ranker: Ranker, plan: LoopPlan, steps_per_epoch: int, main: bool
) -> tuple[int, int, int]:
    """(epochs, optimizer steps in all, warm-up steps) of ``plan`` at ``steps_per_epoch``: epochs
    raised to reach ``min_steps`` (said on the main process), steps cut at ``max_steps``."""
    epochs = planned_epochs(plan, steps_per_epoch)
    if epochs != plan.epochs and main:
        log.info(
            "%s: %d epochs x %d steps is below min_steps=%d, so training runs %d epochs "
            "(the dev split picks the one kept%s)",
            ranker.name,
            plan.epochs,
            steps_per_epoch,
            plan.min_steps,
            epochs,
            f"; patience {plan.patience}" if plan.patience else "",
        )
    total = steps_per_epoch * epochs
    if plan.max_steps is not None:
        total = min(total, plan.max_steps)
    warmup = plan.warmup_steps if plan.warmup_steps is not None else int(plan.warmup_ratio * total)
    return epochs, total, warmup


def _checked_accelerator(
    ranker: Ranker, steps: Any, plan: LoopPlan, accelerator: Accelerator | None
) -> Accelerator:
    """``accelerator`` (default: float32 on the ranker's device), once ``steps`` is known to be
    :class:`Trainable` and the launch fits the plan: a trainer without slicing of its own runs in
    one process."""
    if not isinstance(steps, Trainable):
        raise RankerError(
            f"{ranker.name}: {type(steps).__name__} lacks training_module, epoch_batches or "
            "batch_loss, so the training loop cannot drive it"
        )
    if accelerator is None:
        accelerator = make_accelerator(ranker.device, "float32")
    if accelerator.num_processes > 1 and not plan.distributed:
        raise RankerError(
            f"{ranker.name}: fine-tuning runs in one process; start it without a launcher"
        )
    return accelerator


def stops_before_epoch(state: LoopState) -> bool:
    """Whether training ends before the next epoch: every planned step taken, or ``patience``
    epochs without a better dev score (logged)."""
    progress, plan = state.progress, state.plan
    if progress.step >= state.total:
        return True
    if not out_of_patience(plan, progress, state.dev is not None):
        return False
    if state.main:
        log.info(
            "%s: no better dev %s for %d epochs (best: epoch %d), stopping early",
            state.ranker.name,
            SELECTION_MEASURE,
            plan.patience,
            progress.best_epoch,
        )
    return True


class _LossReader:
    """An epoch's training losses, kept on the device and read :data:`LOSS_READ_STEPS` at a time
    into ``progress.epoch_losses`` (and shown on the progress bar)."""

    def __init__(self, progress: Progress, bar: Any, epoch: int) -> None:
        self.progress, self.bar, self.epoch = progress, bar, epoch
        self.unread: list[torch.Tensor | float] = []

    def add(self, loss: torch.Tensor | float) -> None:
        self.unread.append(loss)
        if len(self.unread) >= LOSS_READ_STEPS:
            self.read()

    def read(self) -> None:
        if self.unread:
            self.progress.epoch_losses.extend(host_values(self.unread))
            self.unread.clear()
            self.bar.set_postfix(epoch=self.epoch, loss=f"{self.progress.epoch_losses[-1]:.4f}")


def run_epoch(state: LoopState, epoch: int, bar: Any) -> None:
    """Epoch ``epoch``'s steps from where the progress stands (a resumed epoch skips the batches
    it trained; ``on_epoch_start`` runs only before a fresh one), with a checkpoint every
    ``plan.checkpoint_steps`` steps inside the epoch; every loss read by the end."""
    progress, steps = state.progress, state.steps
    on_epoch_start = getattr(steps, "on_epoch_start", None)
    if progress.batches_done == 0 and on_epoch_start is not None:
        on_epoch_start(epoch)
    batches = steps.epoch_batches(state.train, epoch)
    state.model.train()
    state.optimizer.zero_grad(set_to_none=True)
    losses = _LossReader(progress, bar, epoch)
    every = state.plan.checkpoint_steps
    for batch in batches[progress.batches_done :]:
        if progress.step >= state.total:
            break
        pending = train_step(state, batch)
        bar.update(1)
        if pending is not None:
            losses.add(pending)  # read with the next LOSS_READ_STEPS - 1 steps'
        due = every and progress.step % every == 0
        if due and progress.batches_done < len(batches) and progress.step < state.total:
            losses.read()  # a checkpoint holds every loss of the epoch so far
            state.run.save()
    losses.read()


def train_step(state: LoopState, batch: Any) -> torch.Tensor | float | None:
    """One optimisation step on this process's slice of ``batch``; returns its loss, not yet read
    from the device (None: no process had signal, so no step was taken)."""
    accelerator, progress = state.accelerator, state.progress
    result = state.steps.batch_loss(_slice(batch, accelerator), state.model)
    pending, used, real = _backward(accelerator, result)
    if used:
        accelerator.clip_grad_norm_(state.model.parameters(), state.plan.max_grad_norm)
        state.optimizer.step()
        state.scheduler.step()
    state.optimizer.zero_grad(set_to_none=True)
    progress.epoch_skipped += real - used
    progress.batches_done += 1
    progress.step += 1
    return pending if used else None


def end_epoch(state: LoopState, epoch: int) -> None:
    """Dev AP@10 of the epoch's weights (every process scores its shard), its record made on the
    main process and shared, and the epoch-end checkpoint."""
    from accelerate.utils import broadcast_object_list

    from rankers.io.models import state_hash

    state.module.eval()
    dev_now = dev_score(state.ranker, state.dev)
    progress, main = state.progress, state.main
    entry: dict[str, Any] | None = None
    if main:
        entry = {
            "epoch": epoch,
            "loss": float(np.mean(progress.epoch_losses)),
            f"dev_{SELECTION_MEASURE}": dev_now,
            "skipped_queries": progress.epoch_skipped,
            "steps": progress.step,
            "weights_hash": state_hash(state.module),
        }
    entry = broadcast_object_list([entry])[0]
    assert entry is not None
    if main:
        log.info("%s epoch %d: %s", state.ranker.name, epoch, entry)
    state.run.end_epoch(epoch, entry, entry[f"dev_{SELECTION_MEASURE}"])


def summarise(state: LoopState) -> TrainingSummary:
    """The best epoch's weights restored, checked equal on every process, and the summary."""
    from accelerate.utils import gather_object

    from rankers.io.models import state_hash

    accelerator, progress, plan = state.accelerator, state.progress, state.plan
    # drops the mixed-precision forward wrapper: scoring casts weights to its own dtype
    accelerator.unwrap_model(state.model, keep_fp32_wrapper=False)
    state.run.restore_best()
    accelerator.free_memory()
    final_hash = state_hash(state.module)
    if len(set(gather_object([final_hash]))) > 1:
        raise RankerError(f"{state.ranker.name}: training processes ended with different weights")
    history = progress.history
    return TrainingSummary(
        epochs=len(history),
        epochs_planned=state.epochs,
        stopped_early=len(history) < state.epochs and progress.step < state.total,
        steps=progress.step,
        steps_planned=state.total,
        **state.run.summary(),
        optimizer={
            "name": "AdamW",
            "lr": plan.lr,
            "weight_decay": plan.weight_decay,
            "schedule": plan.schedule,
            "warmup_steps": state.warmup,
            "max_grad_norm": plan.max_grad_norm,
        },
        skipped_queries=sum(h["skipped_queries"] for h in history),  # summed over epochs
        processes=accelerator.num_processes,
        mixed_precision=accelerator.mixed_precision,
        epoch_weights_hash=[h["weights_hash"] for h in history],
        weights_hash=final_hash,
    )


class _HookState:
    """A ranker's ``training_state``/``load_training_state`` under the names Accelerate's
    checkpointing calls (a ranker's own ``state_dict`` would read like its weights)."""

    def __init__(self, steps: Any) -> None:
        self.steps = steps

    def state_dict(self) -> dict[str, Any]:
        return dict(self.steps.training_state())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps.load_training_state(state)


def host_values(values: Sequence[torch.Tensor | float]) -> list[float]:
    """``values`` as floats with one device read for all the tensors among them."""
    import torch

    tensors = [v.detach().float().reshape(()) for v in values if isinstance(v, torch.Tensor)]
    if not tensors:
        return [float(v) for v in values]
    read = iter(torch.stack(tensors).tolist())
    return [next(read) if isinstance(v, torch.Tensor) else float(v) for v in values]


def _slice(batch: Any, accelerator: Accelerator) -> Any:
    """This process's equal, contiguous part of a global batch (the whole batch in one)."""
    world = accelerator.num_processes
    if world == 1:
        return batch
    size = len(batch) // world
    if size * world != len(batch):
        raise RankerError(f"a batch of {len(batch)} does not split into {world} equal slices")
    return batch[size * accelerator.process_index : size * (accelerator.process_index + 1)]


def _backward(
    accelerator: Accelerator, result: torch.Tensor | BatchLoss
) -> tuple[torch.Tensor | float, int, int]:
    """Backward of one slice's loss; returns the global batch loss, examples used and real.

    Each process's loss is scaled by ``used * world / used_all``: DDP averages gradients over the
    processes, so the result is the gradient of the mean over all examples with signal. The
    counts are host integers; in one process the loss stays on the device (a detached tensor the
    loop reads once, after the optimiser step), so nothing here waits for the device. Several
    processes gather the counts and losses in one tensor, read once (the step's only read).
    """
    import torch

    if not isinstance(result, BatchLoss):
        result = BatchLoss(result, 1, 1)
    local, used, own = result.loss, result.used, result.backward

    def backward(weight: float) -> None:
        if own is None:
            accelerator.backward(local * weight)
        else:
            own(weight, accelerator.backward)

    if accelerator.num_processes == 1:
        backward(1.0 if used else 0.0)
        return local.detach(), used, result.real
    stats = torch.zeros((1, 3), dtype=torch.float64, device=local.device)
    stats[0, 0], stats[0, 2] = used, result.real
    stats[0, 1] = local.detach().double() * used
    used_all, loss_sum, real_all = accelerator.gather(stats).sum(dim=0).tolist()
    backward(used * accelerator.num_processes / used_all if used_all else 0.0)
    return (loss_sum / used_all if used_all else 0.0), int(used_all), int(real_all)
