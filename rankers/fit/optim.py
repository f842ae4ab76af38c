"""What every training shares around the loop: AdamW with its schedule and the Accelerate setup
(device placement and the autocast precision).

Apart from the loop (:mod:`rankers.fit.loop`) because the list trainer sets up Accelerate before
it builds its batches, and the training key (:mod:`bench.execution.keys`) reads the autocast
choice without the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rankers.base import RankerError

if TYPE_CHECKING:
    import torch
    from accelerate import Accelerator
    from torch import nn

#: config dtype -> Accelerate mixed precision on CUDA (CPU always trains in float32); ``auto`` is
#: resolved per GPU by :func:`mixed_precision` (its entry is the answer on Ampere or later)
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
