"""Device selection, seeds and threads: the knobs that change numbers and must be recorded."""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import Iterator
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


def resolve_device(device: str = "auto") -> str:
    """``auto`` picks CUDA when torch sees a GPU, else CPU; ``cuda`` without a GPU is an error."""
    device = device.lower()
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"--device must be auto, cpu, cuda or cuda:N, not {device!r}")
    if device == "cpu":
        return "cpu"
    try:
        import torch
    except ImportError:
        if device == "auto":
            return "cpu"
        raise
    if torch.cuda.is_available():
        return "cuda" if device == "auto" else device
    if device == "auto":
        return "cpu"
    raise ValueError(f"--device {device} asked for, but torch sees no CUDA GPU")


def seed_everything(seed: int) -> None:
    """Python, NumPy and torch (all devices) seeds."""
    random.seed(seed)
    np.random.seed(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


@contextlib.contextmanager
def deterministic_kernels(device: str) -> Iterator[None]:
    """On CPU, torch's deterministic kernels for the duration (the earlier setting restored).

    Why: some CPU kernels add repeated indices with atomic adds from several threads (the
    backward of advanced indexing, ``index_put_`` with accumulate), so their sum order follows
    thread timing: a training beside other work ended with weights apart in their last bits.
    The deterministic mode runs those in index order; the other CPU kernels, whose threads
    split the work by thread count alone, are unchanged, so it costs nothing where no such
    kernel runs. Uninitialised memory is not filled (the mode's default NaN fill costs a pass
    over every new tensor and changes no result of code that reads what it wrote). CUDA is
    left alone: there the mode needs a cuBLAS workspace setting and slower kernels, and GPU
    training is not claimed bitwise reproducible."""
    if device.startswith("cuda"):
        yield
        return
    import torch
    import torch.utils.deterministic

    was = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    # warn_only: an op without a deterministic CPU kernel warns instead of stopping a training
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill  # type: ignore[attr-defined]


def set_threads(threads: int | None) -> int:
    """Fix torch's intra-op thread count (None keeps the default); returns the count in force."""
    try:
        import torch
    except ImportError:
        return threads or os.cpu_count() or 1
    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def synchronize(device: str) -> None:
    """Wait for queued CUDA work, so that a timer read after it measures finished work."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def device_info(device: str) -> dict[str, Any]:
    """What a result must say about the hardware it ran on."""
    info: dict[str, Any] = {"device": device, "cpu_count": os.cpu_count()}
    try:
        import torch
    except ImportError:
        return info
    info["torch"] = torch.__version__
    info["threads"] = torch.get_num_threads()
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    return info


#: (device, purpose) pairs whose dtype=auto choice was logged already
_told: set[tuple[str, str]] = set()


def bf16_supported(device: str) -> bool:
    """Whether the CUDA ``device`` runs bfloat16 natively (compute capability 8.0+: Ampere or
    later). Emulated bf16 (V100, T4) is not counted: it runs slowly or fails in training."""
    import torch

    index = torch.device(device).index
    with torch.cuda.device(index if index is not None else torch.cuda.current_device()):
        try:
            return bool(torch.cuda.is_bf16_supported(including_emulation=False))
        except TypeError:  # torch before 2.3: no emulation flag, and no emulation counted
            return bool(torch.cuda.is_bf16_supported())


def auto_choice(device: str, purpose: str, native: str, fallback: str) -> str:
    """``native`` where ``device`` runs bf16 natively, else ``fallback``; logged once per device
    and purpose, with the reason, so a record's dtype can be traced to the GPU."""
    supported = bf16_supported(device)
    chosen = native if supported else fallback
    if (device, purpose) not in _told:
        _told.add((device, purpose))
        why = "runs bfloat16 natively" if supported else "has no native bfloat16 (before Ampere)"
        log.info("dtype=auto for %s on %s: %s (the GPU %s)", purpose, device, chosen, why)
    return chosen
