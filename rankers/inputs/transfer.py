"""Host-to-device transfer of a batch: every array in ONE copy (see :func:`upload`).

A module of its own so training code (:mod:`rankers.fit.lists`) and the encoders share it
without importing each other.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator

import numpy as np
import torch
from torch import Tensor

#: arrays that ride along with the next :func:`upload` (see :func:`upload_along`), and where
#: their tensors go
_RIDERS: contextvars.ContextVar[tuple[dict[str, np.ndarray], dict[str, Tensor]] | None] = (
    contextvars.ContextVar("upload_riders", default=None)
)


@contextlib.contextmanager
def upload_along(arrays: dict[str, np.ndarray]) -> Iterator[dict[str, Tensor]]:
    """Make the first :func:`upload` inside carry ``arrays`` too (float32, bool or integer), in
    its one host-to-device copy; yields the dict their tensors are put in. A training step uses
    it to send the targets and their mask with the ranker's inputs (``ranker.prepare``) instead
    of in copies of their own. Empty after the block when nothing was uploaded inside."""
    out: dict[str, Tensor] = {}
    token = _RIDERS.set((arrays, out))
    try:
        yield out
    finally:
        _RIDERS.reset(token)


def _as_int64(a: np.ndarray) -> np.ndarray:
    """An array as the int64 values one upload buffer holds (float32: its bit pattern)."""
    a = np.asarray(a)
    if a.dtype == np.float32:
        return a.view(np.int32)
    return a


def _restore(t: Tensor, dtype: np.dtype) -> Tensor:
    """The uploaded int64 view back in ``dtype`` (a device-side cast, no copy to the host)."""
    if dtype == np.float32:
        return t.to(torch.int32).view(torch.float32)
    if dtype == np.bool_:
        return t.bool()
    return t


def upload(arrays: dict[str, np.ndarray], device: str) -> dict[str, Tensor]:
    """int64 arrays -> tensors on ``device`` with ONE host-to-device copy, split into views there.

    On CUDA the arrays are written straight into one pinned buffer (one host copy) that is copied
    without blocking; on CPU they are packed into one plain buffer (no pinning, no device copy).
    Arrays given to an enclosing :func:`upload_along` ride in the same buffer."""
    riders = _RIDERS.get()
    extra: dict[str, np.ndarray] = {}
    if riders is not None:
        _RIDERS.set(None)  # only the first upload of the block carries them
        extra = {f"\0{k}": np.asarray(v) for k, v in riders[0].items()}
    dtypes = {k: v.dtype for k, v in extra.items()}
    arrays = {**arrays, **{k: _as_int64(v) for k, v in extra.items()}}
    shapes = [np.shape(a) for a in arrays.values()]
    sizes = [math.prod(shape) for shape in shapes]
    if device.startswith("cuda"):
        # pinned memory is allocated in the current device's context: make it the target's, so
        # a run on cuda:1 opens no context on cuda:0
        with torch.cuda.device(torch.device(device)):
            buffer = torch.empty(sum(sizes), dtype=torch.int64, pin_memory=True)
        host, start = buffer.numpy(), 0
        for a, size in zip(arrays.values(), sizes, strict=True):
            host[start : start + size] = np.ravel(a)  # casts to int64 while writing
            start += size
        buffer = buffer.to(device, non_blocking=True)
    else:
        flat = [np.ravel(a) for a in arrays.values()]
        buffer = torch.from_numpy(np.concatenate(flat, dtype=np.int64, casting="same_kind"))
    # one split into views (a slice and a view per array cost more than the copy of a list)
    out = {
        name: part if len(shape) == 1 else part.view(shape)
        for name, shape, part in zip(
            arrays, shapes, torch.split(buffer, sizes) if sizes else (), strict=True
        )
    }
    if riders is not None:
        for name, dtype in dtypes.items():
            riders[1][name[1:]] = _restore(out.pop(name), dtype)
    return out
