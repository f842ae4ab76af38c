"""One training loop for every trainable ranker, and the list trainer built on it.

**The loop** (:func:`train_loop`). A ranker declares its training step through the small
:class:`Trainable` protocol - ``training_module()``, ``epoch_batches(train, epoch)``,
``batch_loss(batch, module)``, optionally ``on_epoch_start(epoch)`` and a
``training_state()``/``load_training_state()`` pair - and its settings as a :class:`LoopPlan`.
Everything around the step is shared, so it behaves the same for monoBERT, CROSS-JEM and RankT5
(:class:`ListSteps`), ColBERT (colbert-ai's objective on triples) and the dual encoders DPR and
ANCE (pairs with hard negatives): AdamW (no decay on biases and LayerNorm unless the plan says
otherwise), a linear warm-up/decay or constant schedule, gradient clipping, dev AP@10 through
``ranker.score`` after every epoch, the best epoch's weights kept, checkpoints and resume, and
the training summary.

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
(:func:`rankers.fit.lists.fit_lists`) and the list rankers' shared options in
:mod:`rankers.fit.lists`.
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
from rankers.fit.resume import SELECTION_MEASURE, Progress, Resumable, checkpoint_key

if TYPE_CHECKING:
    import torch
    from accelerate import Accelerator
    from torch import nn

log = logging.getLogger(__name__)

#: config dtype -> Accelerate mixed precision on CUDA (CPU always trains in float32); ``auto`` is
#: resolved per GPU by :func:`mixed_precision` (its entry is the answer on Ampere or later)
#: training losses stay on the device and are read this many steps at a time (and at each epoch's
#: end and checkpoint): a read per step makes the host wait for the GPU before packing the next
#: batch, so host preparation never overlaps the device's work
LOSS_READ_STEPS = 16
MIXED_PRECISION = {"auto": "bf16", "bfloat16": "bf16", "float16": "fp16", "float32": "no"}


def mixed_precision(device: str, dtype: str) -> str:
    """Accelerate's mixed precision for option ``dtype`` on ``device``: none on CPU; ``auto`` is
    bf16 autocast only on a GPU with native bf16, else float32 (fp16 training would need loss
    scaling the user did not ask for), logged with the reason."""
    if not device.startswith("cuda"):
        return "no"
    if dtype == "auto":
        from bench.core.device import auto_choice

        return auto_choice(device, "training", "bf16", "no")
    return MIXED_PRECISION.get(dtype, "no")


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


# -- optimisation --------------------------------------------------------------------------------
#: parameter-name endings AdamW does not decay (biases and LayerNorm, the usual BERT recipe)
NO_DECAY: tuple[str, ...] = ("bias", "LayerNorm.weight", "LayerNorm.bias")


def adamw(
    module: nn.Module,
    lr: float,
    weight_decay: float,
    total_steps: int,
    warmup_steps: int = 0,
    schedule: str = "linear",
    no_decay: tuple[str, ...] = NO_DECAY,
) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW over the trainable parameters (those ending in ``no_decay`` without weight decay)
    and its schedule: ``linear`` warm-up then linear decay to 0 at ``total_steps``, or
    ``constant`` (colbert-ai's default when it has no warm-up). An empty ``no_decay`` decays
    every weight, as colbert-ai's own trainer does."""
    import torch
    from transformers import get_constant_schedule, get_linear_schedule_with_warmup

    named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in named if not n.endswith(no_decay)], "weight_decay": weight_decay},
        {"params": [p for n, p in named if no_decay and n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=lr)
    if schedule == "constant":
        return optimizer, get_constant_schedule(optimizer)
    if schedule != "linear":
        raise RankerError(f"unknown learning-rate schedule {schedule!r} (linear or constant)")
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)


def adamw_linear(
    module: nn.Module, lr: float, weight_decay: float, warmup_ratio: float, total_steps: int
) -> tuple[torch.optim.Optimizer, Any]:
    """:func:`adamw` with the usual groups, warming up over ``warmup_ratio`` of the steps."""
    return adamw(module, lr, weight_decay, total_steps, int(warmup_ratio * total_steps))


def make_accelerator(device: str, dtype: str) -> Accelerator:
    """An Accelerator for ``device`` (cpu or cuda) with split batches and the dtype's autocast."""
    from datetime import timedelta

    import torch
    from accelerate import Accelerator, DataLoaderConfiguration
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs

    cuda = device.startswith("cuda")
    if cuda and ":" in device:
        # Accelerate places a single process on the *current* CUDA device ("cuda"): make that
        # the requested one, so `--device cuda:1` trains, scores and loads teachers on GPU 1
        torch.cuda.set_device(device)
    options: dict[str, Any] = {
        "cpu": not cuda,
        "mixed_precision": mixed_precision(device, dtype),
        # one scheduler step per optimisation step, whatever the process count (the loop cuts
        # the global batches into the processes' slices itself)
        "dataloader_config": DataLoaderConfiguration(split_batches=True),
        "kwargs_handlers": [
            # the encoders' pooler (and any head a variant skips) gets no gradient
            DistributedDataParallelKwargs(find_unused_parameters=True),
            # the main process scores the teacher and dev alone while the others wait
            InitProcessGroupKwargs(timeout=timedelta(hours=3)),
        ],
    }
    try:
        accelerator = Accelerator(**options)
    except ValueError as exc:
        # Accelerate's state is per process; a single process may switch device or precision
        if "already been initialized" not in str(exc) or PartialState().num_processes > 1:
            raise RankerError(f"cannot set up Accelerate for {device}/{dtype}: {exc}") from exc
        AcceleratorState._reset_state(reset_partial_state=True)
        accelerator = Accelerator(**options)
    placed = accelerated_device(accelerator)
    if cuda and ":" in device and placed != device:
        # under a launcher each process takes the GPU of its local rank
        raise RankerError(
            f"training asked for {device} but Accelerate placed this process on {placed}; "
            "under `accelerate launch` use --device cuda (each process takes its rank's GPU)"
        )
    return accelerator


def accelerated_device(accelerator: Accelerator) -> str:
    """The device Accelerate trains on, as ``cpu`` or ``cuda:N``: its ``cuda`` without an index
    means the current device, which the ranker must name explicitly (scoring, teachers and dev
    evaluation follow ``ranker.device``)."""
    import torch

    device = accelerator.device
    if device.type != "cuda":
        return device.type
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"cuda:{index}"


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
    """The training step a ranker declares; :func:`train_loop` owns everything around it.

    In the manner of lightning-ir's one training step with a loss hook: the ranker says what
    module is trained, which batches an epoch has and what one batch's loss is; the loop does
    the optimiser, schedule, Accelerate, dev scoring, best-epoch selection, checkpoints and
    resume the same way for every ranker. ``epoch_batches`` must depend on (seed, epoch) only,
    so a resumed run sees the same batches and skips the ones already trained. Optional hooks,
    looked up by name: ``on_epoch_start(epoch)`` before a fresh (not resumed mid-way) epoch, and
    ``training_state()``/``load_training_state(state)`` for state the ranker keeps across epochs
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
    """:func:`_train_loop` with the ranker's scoring in its training precision
    (:func:`rankers.precision.training_precision`): dev scoring selects the epoch, so it must
    not depend on the runtime-only ``dtype``."""
    from rankers.precision import training_precision

    with training_precision(ranker.config):
        return _train_loop(
            ranker,
            steps,
            train_split,
            dev,
            plan,
            accelerator=accelerator,
            work_dir=work_dir,
            on_checkpoint=on_checkpoint,
        )


def _train_loop(
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
    """Train ``steps`` (often ``ranker`` itself) in place; returns the shared training summary.

    One loop for every trainable ranker: seed, AdamW and schedule, ``accelerator.prepare``,
    resume from ``work_dir``'s checkpoint, then per epoch ``on_epoch_start``, the steps (each
    process takes an equal contiguous slice of every global batch, as Accelerate's split
    batches do), checkpoints every ``plan.checkpoint_steps`` steps, dev AP@10 through
    ``ranker.score`` on the main process and the epoch-end checkpoint; at the end the best
    epoch's weights are restored. Without ``accelerator``, one is made in float32 on the
    ranker's device. ``on_checkpoint`` is called on every process after each published
    checkpoint with ``{"epoch", "step"}``.
    """
    from accelerate.utils import broadcast_object_list, gather_object

    from bench.core.device import deterministic_kernels, seed_everything
    from bench.core.progress import progress_bar
    from rankers.io.models import state_hash

    if not isinstance(steps, Trainable):
        raise RankerError(
            f"{ranker.name}: {type(steps).__name__} lacks training_module, epoch_batches or "
            "batch_loss, so the training loop cannot drive it"
        )
    if accelerator is None:
        accelerator = make_accelerator(ranker.device, "float32")
    main, world = accelerator.is_main_process, accelerator.num_processes
    if world > 1 and not plan.distributed:
        raise RankerError(
            f"{ranker.name}: fine-tuning runs in one process; start it without a launcher"
        )

    def on_main(compute: Callable[[], Any]) -> Any:
        """Run on the main process only; every process gets the result."""
        return broadcast_object_list([compute() if main else None])[0]

    seed_everything(plan.seed + accelerator.process_index)
    module = steps.training_module()
    steps_per_epoch = len(steps.epoch_batches(train_split, 1))
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
    optimizer, scheduler = adamw(
        module, plan.lr, plan.weight_decay, total, warmup, plan.schedule, plan.no_decay
    )
    model, optimizer, scheduler = accelerator.prepare(module, optimizer, scheduler)
    if accelerator.unwrap_model(model) is not module:
        raise RankerError(f"{ranker.name}: Accelerate returned another module than it was given")
    key = checkpoint_key(ranker, plan.data, dev, world, accelerator.mixed_precision)
    work = work_dir if work_dir is not None else ranker.work_dir
    run = Resumable(accelerator, module, work, key, ranker.name, on_checkpoint)
    if callable(getattr(steps, "training_state", None)):
        # after Progress, so every checkpoint holds them in the same order
        accelerator.register_for_checkpointing(_HookState(steps))
    progress = run.progress
    if not run.resume():
        progress.dev_before = dev_score(ranker, dev)  # every process scores its shard
    if main:
        log.info(
            "%s fine-tuning: %s; %d epochs x %d steps (%d in all), %d process(es), "
            "mixed precision %s",
            ranker.name,
            plan.describe,
            epochs,
            steps_per_epoch,
            total,
            world,
            accelerator.mixed_precision,
        )
    on_epoch_start = getattr(steps, "on_epoch_start", None)
    every = plan.checkpoint_steps
    bar = progress_bar(total, f"{ranker.name} fit", "step", initial=progress.step, enabled=main)
    # the same weights whatever else runs on the machine (CPU kernels that add in thread order
    # run in index order)
    with bar, deterministic_kernels(ranker.device):
        for epoch in range(progress.epochs_done + 1, epochs + 1):
            if progress.step >= total:
                break
            if out_of_patience(plan, progress, dev is not None):
                if main:
                    log.info(
                        "%s: no better dev %s for %d epochs (best: epoch %d), stopping early",
                        ranker.name,
                        SELECTION_MEASURE,
                        plan.patience,
                        progress.best_epoch,
                    )
                break
            if progress.batches_done == 0 and on_epoch_start is not None:
                on_epoch_start(epoch)
            batches = steps.epoch_batches(train_split, epoch)
            model.train()
            optimizer.zero_grad(set_to_none=True)
            unread: list[torch.Tensor | float] = []  # losses still on the device

            def read_losses(
                unread: list[torch.Tensor | float] = unread, epoch: int = epoch
            ) -> None:
                if unread:
                    progress.epoch_losses.extend(host_values(unread))
                    unread.clear()
                    bar.set_postfix(epoch=epoch, loss=f"{progress.epoch_losses[-1]:.4f}")

            for batch in batches[progress.batches_done :]:
                if progress.step >= total:
                    break
                result = steps.batch_loss(_slice(batch, accelerator), model)
                pending, used, real = _backward(accelerator, result)
                if used:
                    accelerator.clip_grad_norm_(model.parameters(), plan.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    unread.append(pending)  # read with the next LOSS_READ_STEPS - 1 steps'
                optimizer.zero_grad(set_to_none=True)
                progress.epoch_skipped += real - used
                progress.batches_done += 1
                progress.step += 1
                bar.update(1)
                if len(unread) >= LOSS_READ_STEPS:
                    read_losses()
                due = every and progress.step % every == 0
                if due and progress.batches_done < len(batches) and progress.step < total:
                    read_losses()  # a checkpoint holds every loss of the epoch so far
                    run.save()
            read_losses()
            module.eval()
            dev_now = dev_score(ranker, dev)  # every process scores its shard

            def record(epoch: int = epoch, dev_now: float | None = dev_now) -> dict[str, Any]:
                return {
                    "epoch": epoch,
                    "loss": float(np.mean(progress.epoch_losses)),
                    f"dev_{SELECTION_MEASURE}": dev_now,
                    "skipped_queries": progress.epoch_skipped,
                    "steps": progress.step,
                    "weights_hash": state_hash(module),
                }

            entry = on_main(record)
            if main:
                log.info("%s epoch %d: %s", ranker.name, epoch, entry)
            run.end_epoch(epoch, entry, entry[f"dev_{SELECTION_MEASURE}"])

    # drops the mixed-precision forward wrapper: scoring casts weights to its own dtype
    accelerator.unwrap_model(model, keep_fp32_wrapper=False)
    run.restore_best()
    accelerator.free_memory()
    final_hash = state_hash(module)
    if len(set(gather_object([final_hash]))) > 1:
        raise RankerError(f"{ranker.name}: training processes ended with different weights")
    history = progress.history
    return TrainingSummary(
        epochs=len(history),
        epochs_planned=epochs,
        stopped_early=len(history) < epochs and progress.step < total,
        steps=progress.step,
        steps_planned=total,
        **run.summary(),
        optimizer={
            "name": "AdamW",
            "lr": plan.lr,
            "weight_decay": plan.weight_decay,
            "schedule": plan.schedule,
            "warmup_steps": warmup,
            "max_grad_norm": plan.max_grad_norm,
        },
        skipped_queries=sum(h["skipped_queries"] for h in history),  # summed over epochs
        processes=world,
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
