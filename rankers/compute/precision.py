"""The dtype option's meaning: names -> torch dtypes, ``auto`` resolved per device, the CUDA
matmul mode (``tf32``: float32 weights on TF32 tensor cores; every other precision true float32
matmuls: :func:`matmul_precision`), how latency records name it, and the low-precision scoring
copy (:class:`CastCache`) with its float32 heads. Below every ranker module (only torch and
:mod:`bench.core.device`), so the ranker base, the configs and the encoders read one definition.
"""

from __future__ import annotations

import contextlib
import copy
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import torch
from torch import Tensor, nn

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


#: the scoring precision that no torch module runs in: an int8 runtime's (rankers.compute.runtimes)
INT8 = "int8"
#: the scoring precision of float32 weights on TF32 tensor cores (a CUDA matmul mode, not a
#: dtype: :func:`matmul_precision`; rankers.base.TORCH_SCORING_DTYPE_NAMES lists it)
TF32 = "tf32"


def tf32_device(device: str) -> bool:
    """Whether ``device`` has TF32 matmuls (a CUDA device; tests fake one by replacing this)."""
    return device.startswith("cuda")


def check_dtype_device(dtype: str, device: str) -> None:
    """A RankerError naming the option when ``dtype`` cannot score on ``device``: ``tf32`` is
    a CUDA matmul mode, and a CPU has no TF32 (its float32 matmuls are always IEEE)."""
    if dtype == TF32 and not tf32_device(device):
        raise RankerError(
            f"option dtype={TF32} runs float32 weights on TF32 tensor cores, a CUDA matmul mode: "
            f"device {device!r} has no TF32 (use --device cuda, or dtype=float32)"
        )


@contextlib.contextmanager
def matmul_precision(dtype: str, device: str) -> Iterator[None]:
    """While scoring in option ``dtype`` on a CUDA ``device``: TF32 matmuls (cuBLAS and cuDNN)
    on for ``tf32`` and off for every other precision, so ``float32`` on a GPU is true float32
    whatever the process set before (cuDNN allows TF32 by default), and runs of several
    precisions interleaved call by call each time in their own mode; the previous flags are
    restored afterwards, also on error. Nothing changes on a CPU."""
    if not tf32_device(device):
        yield
        return
    check_dtype_device(dtype, device)
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.allow_tf32, cudnn.allow_tf32)
    matmul.allow_tf32 = cudnn.allow_tf32 = dtype == TF32
    try:
        yield
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = saved


def scoring_dtype(dtype: str, device: str) -> torch.dtype:
    """The dtype scoring runs in: option ``dtype`` on ``device``. ``auto``: float32 on CPU,
    bfloat16 on a GPU with native bf16, float16 on an older one; ``tf32``: float32 weights (on
    a CUDA device only: :func:`check_dtype_device`). ``int8`` is an int8 runtime's
    precision, which no torch module is cast to: asking for it here is an error that says where
    int8 runs."""
    check_dtype_device(dtype, device)
    if dtype == TF32:
        return torch.float32
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


#: what a CUDA record adds to float32 weights: the matmul mode they ran in
TF32_MATMULS = "tf32 matmuls"
IEEE_MATMULS = "ieee fp32 matmuls"


def dtype_label(dtype: str, device: str) -> str:
    """What latency records say about the scoring dtype: ``float32`` or ``<dtype> weights``;
    on a CUDA device float32 weights also name their matmul mode (``float32, tf32 matmuls`` or
    ``float32, ieee fp32 matmuls``), so a GPU record says which float32 it timed."""
    resolved = scoring_dtype(dtype, device)
    name = str(resolved).removeprefix("torch.")
    if resolved != torch.float32:
        return f"{name} weights"
    if tf32_device(device):
        return f"{name}, {TF32_MATMULS if dtype == TF32 else IEEE_MATMULS}"
    return name


@contextlib.contextmanager
def scoring_precision(module: nn.Module, dtype: str, device: str) -> Iterator[None]:
    """How a ranker with a scoring ``dtype`` option scores: :func:`evaluating` ``module`` under
    the matmul mode of ``dtype`` (:func:`matmul_precision`)."""
    with evaluating(module), matmul_precision(dtype, device):
        yield


@contextlib.contextmanager
def evaluating(module: nn.Module) -> Iterator[None]:
    """``module`` in eval mode without autograd, its previous mode restored afterwards: how every
    ranker scores (dev scoring inside training included). Only a module in training mode is
    switched: ``eval()`` walks every submodule (124 of them in a 6-layer BERT, 0.66 ms a call),
    which a loaded ranker, already in eval mode, would pay on every scoring call."""
    was_training = module.training
    if was_training:
        module.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        if was_training:
            module.train(True)


@contextlib.contextmanager
def training_precision(config: Any) -> Iterator[None]:
    """While a ranker fine-tunes, its scoring (the dev scoring that selects the epoch) runs in
    ``config.train_dtype``: the trained weights then depend only on training options, so the
    runtime-only ``dtype`` scores the float32-trained model in another precision without
    training it again. For the same reason a config's ``runtime``
    (:mod:`rankers.compute.runtimes`) is
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


M = TypeVar("M", bound=nn.Module)


def _float32_inputs(_module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Forward pre-hook of a float32 head: its floating inputs (dict values too) to float32."""

    def cast(value: Any) -> Any:
        if isinstance(value, Tensor) and value.is_floating_point():
            return value.float()
        if isinstance(value, Mapping):  # sentence-transformers' features (dict, BatchEncoding)
            return {k: cast(v) for k, v in value.items()}
        return value

    return tuple(cast(a) for a in args)


def keep_float32(clone: nn.Module, source: nn.Module, heads: Sequence[nn.Module]) -> None:
    """Give ``heads`` (submodules of the cast ``clone``) back their float32 weights from
    ``source`` and make them cast their inputs to float32, so pooling and logits are computed and
    kept in float32 over a low-precision encoder: a bf16 head rounds each logit to 8 bits of
    mantissa (steps of 2^-7..2^-6 at the usual logit sizes), which ties and flips close items.

    Weights are set as new parameters, so a head tied to an embedding (T5's LM head, BERT's
    decoder) does not turn the encoder's embedding back to float32."""
    kept = {id(h) for h in heads}
    for name, head in clone.named_modules():
        if id(head) not in kept:
            continue
        original = source.get_submodule(name)
        for full, value in [*original.named_parameters(), *original.named_buffers()]:
            owner_name, _, leaf = full.rpartition(".")
            owner = head.get_submodule(owner_name)
            if leaf in owner._parameters:
                owner._parameters[leaf] = nn.Parameter(value.detach().clone(), requires_grad=False)
            else:
                owner._buffers[leaf] = value.detach().clone()
        head.register_forward_pre_hook(_float32_inputs)


class CastCache(Generic[M]):
    """A copy of a module with its weights cast once to a low-precision dtype for scoring.

    Per-call autocast re-casts every weight on every call (on an H100 that erased CROSS-JEM's
    advantage); a cast copy costs it once. ``heads`` names the copy's submodules that stay in
    float32 (the classifier, projection or LM head: :func:`keep_float32`), so only the encoder
    runs in the low-precision dtype and scores keep float32 resolution. Training keeps the
    float32 module (autocast, fp32 master weights): the copy is rebuilt whenever a parameter of
    the source has changed since (optimiser steps and ``load_state_dict`` bump tensors' version
    counters)."""

    def __init__(self, heads: Callable[[M], Sequence[nn.Module]] | None = None) -> None:
        self._key: tuple[Any, ...] | None = None
        self._module: M | None = None
        self._heads = heads
        #: the module last asked about for float32, and whether all its parameters were float32
        self._float32: tuple[weakref.ref[nn.Module], bool] | None = None

    def _all_float32(self, module: nn.Module) -> bool:
        """Whether every parameter of ``module`` is float32: asked once per module (a walk of
        its parameters costs 0.18 ms a scoring call); a ranker's module keeps its dtype (a
        scoring precision casts a copy), so the verdict holds while the module lives."""
        cached = self._float32
        if cached is not None and cached[0]() is module:
            return cached[1]
        verdict = all(p.dtype == torch.float32 for p in module.parameters())
        self._float32 = (weakref.ref(module), verdict)
        return verdict

    def get(self, module: M, dtype: torch.dtype) -> M:
        if dtype == torch.float32 and self._all_float32(module):
            return module
        key = (id(module), dtype, tuple(p._version for p in module.parameters()))
        if self._key != key or self._module is None:
            clone = copy.deepcopy(module)
            heads = list(self._heads(clone)) if self._heads is not None else []
            clone = clone.to(dtype).eval()
            keep_float32(clone, module, heads)
            self._module = clone
            self._key = key
        return self._module


def float32_logits(head: nn.Module, features: Tensor) -> Tensor:
    """``head(features)`` squeezed to one float32 logit per row, with the features cast to the
    head's dtype: float32 under a bf16 scoring copy (:class:`CastCache` keeps heads in float32),
    so the pooled features are never rounded to bf16 on their way to the logit."""
    weight = next(head.parameters())
    # autocast would run a float32 head in bf16 anyway (it casts a Linear's inputs and weights):
    # the head is switched out of it, so training logits keep float32 resolution too
    with torch.autocast(device_type=features.device.type, enabled=False):
        return head(features.to(weight.dtype)).squeeze(-1).float()
