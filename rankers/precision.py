"""The dtype option's meaning: names -> torch dtypes, ``auto`` resolved per device, and how
latency records name it. Below every ranker module (only torch and :mod:`bench.core.device`), so the
ranker base, the configs and the encoders read one definition.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from bench.core.device import auto_choice
from rankers.errors import RankerError

#: options ``dtype`` and ``train_dtype`` (names: rankers.base.DTYPE_NAMES) -> torch dtype.
#: Training (``train_dtype``): the autocast dtype on CUDA (fp32 master weights; CPU trains in
#: float32). Scoring (``dtype``): the dtype the weights are cast to once. ``auto`` is resolved
#: per device by :func:`scoring_dtype` (bfloat16 on a GPU that runs it natively, else float16;
#: float32 on CPU); its entry here is the usual answer.
DTYPES: dict[str, torch.dtype | None] = {
    "auto": torch.bfloat16,
    "float32": None,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


#: the scoring precision that no torch module runs in: an int8 runtime's (rankers.runtimes)
INT8 = "int8"


def scoring_dtype(dtype: str, device: str) -> torch.dtype:
    """The dtype scoring runs in: option ``dtype`` on ``device``. ``auto``: float32 on CPU,
    bfloat16 on a GPU with native bf16, float16 on an older one. ``int8`` is an int8 runtime's
    precision, which no torch module is cast to: asking for it here is an error that says where
    int8 runs."""
    if dtype == INT8:
        raise RankerError(
            "dtype=int8 quantizes the encoder on an int8 runtime: add --set runtime=onnxruntime "
            "(pip install 'crossjem-bench[runtimes]'); PyTorch scoring runs float32, bfloat16 or "
            "float16"
        )
    if dtype == "auto":
        if not device.startswith("cuda"):
            return torch.float32
        name = auto_choice(device, "scoring", "bfloat16", "float16")
        return DTYPES[name] or torch.float32
    return DTYPES[dtype] or torch.float32


def dtype_label(dtype: str, device: str) -> str:
    """What latency records say about the scoring dtype: ``float32`` or ``<dtype> weights``."""
    resolved = scoring_dtype(dtype, device)
    name = str(resolved).removeprefix("torch.")
    return name if resolved == torch.float32 else f"{name} weights"


@contextlib.contextmanager
def training_precision(config: Any) -> Iterator[None]:
    """While a ranker fine-tunes, its scoring (the dev scoring that selects the epoch) runs in
    ``config.train_dtype``: the trained weights then depend only on training options, so the
    runtime-only ``dtype`` scores the float32-trained model in another precision without
    training it again. For the same reason a config's ``runtime`` (:mod:`rankers.runtimes`) is
    torch meanwhile. Restores both afterwards, also on error. A config without both precision
    options (an out-of-tree ranker's) is left as it is."""
    if not (hasattr(config, "dtype") and hasattr(config, "train_dtype")):
        yield
        return
    saved = config.dtype
    runtime = getattr(config, "runtime", None)
    config.dtype = config.train_dtype
    if runtime is not None:
        config.runtime = "torch"
    try:
        yield
    finally:
        config.dtype = saved
        if runtime is not None:
            config.runtime = runtime
