"""Kernel rates of this machine, measured once, for the latency cost model
(:mod:`bench.latency.timemodel`).

Counting FLOPs predicts one speed-up in every precision, but a CPU does not speed every kernel up
alike: a bfloat16 matrix product may run several times faster (or, without native bf16, slower)
than a float32 one while the attention kernel on long rows gains nothing. So the cost model
predicts time from rates measured on the machine, for the kernels a BERT layer runs:

* ``linear``: ``F.linear`` of ``tokens x k`` by ``k x n`` for each weight shape of a layer (Q, K,
  V and output ``d x d``; feed-forward ``d x d_ff`` and ``d_ff x d``) at a few token counts,
  as GFLOP/s;
* ``attention``: the attention the ranker runs (:data:`ATTENTIONS`, by name) on
  ``rows x heads x L x head_dim`` inputs laid out as a BERT layer hands them over (transposed
  views of the projections), without a mask and with the boolean ``rows x 1 x L x L`` padding
  mask transformers builds, at lengths :data:`LENGTHS`, as ms per row (all heads);
* ``other``: what else a layer does per token (two layer norms, GELU on ``d_ff`` values, two
  residual adds), as ns per token;
* ``peak``: ``torch.matmul`` of 1024 x 1024 matrices, the limit that achieved GFLOP/s are set
  against.

A calibration depends on the CPU, torch's version, the thread count, the dtype, the encoder's
dimensions and the attention, and is cached under that key as
``<results root>/latency/calibration-<dtype>-t<threads>-<hash>.json``, so it is measured once
per machine and setting (a few seconds); ``bench latency --calibrate`` measures it anew.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench.core.io import atomic_write_json
from bench.latency.efficiency import EncoderShape
from bench.latency.records import LATENCY_DIR
from bench.results.records import config_hash

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

R = TypeVar("R", bound="JsonRecord")
C = TypeVar("C", bound="CachedCalibration")

#: attention(q, k, v, mask) -> output, q/k/v (rows, heads, L, head_dim), mask None or boolean
#: (rows, 1, L, L) with True where a position may be attended to
AttentionFn = Callable[["torch.Tensor", "torch.Tensor", "torch.Tensor", "torch.Tensor | None"], Any]


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> Any:
    """What transformers' BERT runs (``attn_implementation="sdpa"``)."""
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


#: the attention implementations the rankers run, by the name their
#: :class:`~rankers.base.EncoderCall` gives: the one place to register a new one, so that its
#: calibration times the attention the ranker really runs
ATTENTIONS: dict[str, AttentionFn] = {"sdpa": sdpa}

#: bumped when what is measured changes, so older cached calibrations are measured anew
VERSION = 1
#: token counts (rows x width) the linear rates are measured at
TOKENS = (128, 512, 2048)
#: sequence lengths the attention is measured at; rows per measurement: ATTENTION_TOKENS // L
LENGTHS = (16, 32, 64, 128, 256, 512)
ATTENTION_TOKENS = 2048
#: dtypes a calibration can be measured in
DTYPES = ("float32", "bfloat16", "float16")


class JsonRecord:
    """A dataclass kept as a JSON file: every field but ``path`` (where it was read from, which
    would tie the file to one machine) is written, and unknown keys are ignored on reading."""

    path: Path | None

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)  # type: ignore[call-overload]
        out.pop("path")
        return out

    @classmethod
    def from_json(cls: type[R], data: dict[str, Any], path: Path | None = None) -> R:
        names = {f.name for f in dataclasses.fields(cls)} - {"path"}  # type: ignore[arg-type]
        return cls(**{**{k: v for k, v in data.items() if k in names}, "path": path})


class CachedCalibration(JsonRecord):
    """What :func:`cached` keeps: a calibration that records the key it was measured under
    (``machine``) and how long it took (``seconds``)."""

    machine: dict[str, Any]
    seconds: float


@dataclass
class Calibration(CachedCalibration):
    """Measured kernel rates of one machine, dtype, thread count, encoder size and attention.

    ``linear``: ``"KxN"`` -> ``[[tokens, GFLOP/s], ...]``; ``attention``: ``"masked"`` /
    ``"unmasked"`` -> ``[[L, ms per row], ...]``."""

    dtype: str
    threads: int
    attention_name: str
    hidden: int
    heads: int
    intermediate: int
    peak_gflops: float
    linear: dict[str, list[list[float]]]
    attention: dict[str, list[list[float]]]
    other_ns_per_token: float
    machine: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    seconds: float = 0.0
    path: Path | None = field(default=None, compare=False)

    def summary(self) -> dict[str, Any]:
        """What a latency record keeps of the calibration it was predicted with."""
        return {
            # the file's name under the results root's latency/: a path would tie the record
            # to the machine it was made on
            "file": self.path.name if self.path else None,
            "dtype": self.dtype,
            "threads": self.threads,
            "attention": self.attention_name,
            "peak_gflops": self.peak_gflops,
            "created": self.created,
        }


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def calibration_key(dtype: str, threads: int, shape: EncoderShape, attention: str) -> dict:
    """Everything a calibration's rates depend on."""
    import torch

    return {
        "cpu": cpu_model(),
        "torch": torch.__version__,
        "threads": threads,
        "dtype": dtype,
        "hidden": shape.hidden,
        "heads": shape.heads,
        "intermediate": shape.intermediate,
        "attention": attention,
        "version": VERSION,
    }


def calibration_path(root: Path, key: dict[str, Any]) -> Path:
    return (
        root / LATENCY_DIR / f"calibration-{key['dtype']}-t{key['threads']}-{config_hash(key)}.json"
    )


def median_ms(call: Callable[[], Any], min_reps: int = 3, min_s: float = 0.05) -> float:
    """Median ms of ``call`` after one untimed call: at least ``min_reps`` timed calls and
    ``min_s`` seconds (the median, as the benchmark's p50, shrugs off a burst of load)."""
    call()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < min_s:
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def linear_shapes(shape: EncoderShape) -> list[tuple[int, int, int]]:
    """``(k, n, count)``: the weight shapes of one BERT layer's linear layers, each ``count``
    times (Q, K, V and output projections, then the feed-forward pair)."""
    d, ff = shape.hidden, shape.intermediate
    return [(d, d, 4), (d, ff, 1), (ff, d, 1)]


def _measure_linear(shape: EncoderShape, dtype: torch.dtype) -> dict[str, list[list[float]]]:
    import torch
    import torch.nn.functional as F

    out: dict[str, list[list[float]]] = {}
    for k, n, _ in linear_shapes(shape):
        weight, bias = torch.randn(n, k, dtype=dtype), torch.randn(n, dtype=dtype)
        points = []
        for tokens in TOKENS:
            x = torch.randn(tokens, k, dtype=dtype)
            ms = median_ms(partial(F.linear, x, weight, bias))
            points.append([tokens, 2 * tokens * k * n / ms / 1e6])
        out[f"{k}x{n}"] = points
    return out


def _measure_attention(
    shape: EncoderShape, dtype: torch.dtype, attention: AttentionFn
) -> dict[str, list[list[float]]]:
    """ms per row of ``attention``, inputs as a BERT layer passes them: (rows, L, heads, dim)
    projections viewed as (rows, heads, L, dim); the mask boolean (rows, 1, L, L), the last
    eighth of each row padding."""
    import torch

    heads, dim = shape.heads, shape.hidden // shape.heads
    out: dict[str, list[list[float]]] = {"unmasked": [], "masked": []}
    for length in LENGTHS:
        rows = max(1, ATTENTION_TOKENS // length)
        q, k, v = (
            torch.randn(rows, length, heads, dim, dtype=dtype).transpose(1, 2) for _ in range(3)
        )
        keep = torch.arange(length) < length - length // 8
        mask = keep[None, None, None, :].expand(rows, 1, length, length).contiguous()
        for name, m in (("unmasked", None), ("masked", mask)):
            ms = median_ms(partial(attention, q, k, v, m))
            out[name].append([length, ms / rows])
    return out


def _measure_other(shape: EncoderShape, dtype: torch.dtype) -> float:
    """ns per token of a layer's other work: two layer norms, GELU, two residual adds."""
    import torch
    import torch.nn.functional as F

    tokens, d, ff = max(TOKENS), shape.hidden, shape.intermediate
    x, y = torch.randn(tokens, d, dtype=dtype), torch.randn(tokens, d, dtype=dtype)
    h = torch.randn(tokens, ff, dtype=dtype)
    norm = torch.nn.LayerNorm(d).to(dtype)

    def layer_rest() -> None:
        with torch.inference_mode():
            norm(x + y)
            F.gelu(h)
            norm(x + y)

    return median_ms(layer_rest) * 1e6 / tokens


def _measure_peak(dtype: torch.dtype) -> float:
    import torch

    a, b = torch.randn(1024, 1024, dtype=dtype), torch.randn(1024, 1024, dtype=dtype)
    return 2 * 1024**3 / median_ms(lambda: torch.matmul(a, b)) / 1e6


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a calibration dtype name (:data:`DTYPES`)."""
    import torch

    if name not in DTYPES:
        raise ValueError(f"no calibration for dtype {name!r}; known: {', '.join(DTYPES)}")
    return getattr(torch, name)


def measure(shape: EncoderShape, dtype: str, attention: str = "sdpa") -> Calibration:
    """Measure every rate at this process's torch thread count (a few seconds)."""
    import torch

    if attention not in ATTENTIONS:
        raise ValueError(f"unknown attention {attention!r}; known: {', '.join(ATTENTIONS)}")
    kind = torch_dtype(dtype)
    start = time.perf_counter()
    with torch.inference_mode():
        cal = Calibration(
            dtype=dtype,
            threads=torch.get_num_threads(),
            attention_name=attention,
            hidden=shape.hidden,
            heads=shape.heads,
            intermediate=shape.intermediate,
            peak_gflops=_measure_peak(kind),
            linear=_measure_linear(shape, kind),
            attention=_measure_attention(shape, kind, ATTENTIONS[attention]),
            other_ns_per_token=_measure_other(shape, kind),
        )
    cal.seconds = time.perf_counter() - start
    cal.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return cal


def load_or_measure(
    root: Path,
    shape: EncoderShape,
    dtype: str,
    attention: str = "sdpa",
    fresh: bool = False,
    measure_fn: Callable[[EncoderShape, str, str], Calibration] | None = None,
) -> Calibration:
    """The cached calibration of this machine and setting, measured (and cached) when there is
    none or ``fresh``; ``measure_fn`` measures (default :func:`measure`; tests pass a fake)."""
    import torch

    key = calibration_key(dtype, torch.get_num_threads(), shape, attention)
    return cached(
        calibration_path(root, key),
        Calibration,
        key,
        partial(measure_fn or measure, shape, dtype, attention),
        fresh,
        f"{dtype} kernels ({key['threads']} thread(s), {attention} attention)",
    )


def cached(
    path: Path,
    kind: type[C],
    key: dict[str, Any],
    measure_now: Callable[[], C],
    fresh: bool,
    what: str,
) -> C:
    """The calibration cached at ``path``, else (or ``fresh``) ``measure_now()``, given
    ``machine=key`` and written there; a file that cannot be read is measured anew (a warning
    names it). ``what`` says what is calibrated, for the log."""
    if path.is_file() and not fresh:
        try:
            cal = kind.from_json(json.loads(path.read_text(encoding="utf-8")), path)
            log.debug("calibration from %s", path)
            return cal
        except (ValueError, TypeError) as exc:
            log.warning("measuring anew: cannot read %s (%s)", path, exc)
    log.info("calibrating %s", what)
    cal = measure_now()
    cal.machine = key
    atomic_write_json(path, cal.to_json())
    cal.path = path
    log.info("calibration (%.1f s) written to %s", cal.seconds, path)
    return cal


class Calibrations:
    """The calibrations of one benchmark run, each loaded (or measured) once: ``fresh``
    measures every one anew, once per run, as ``bench latency --calibrate`` asks."""

    def __init__(
        self,
        root: Path,
        device: str = "cpu",
        fresh: bool = False,
        measure_fn: Callable[[EncoderShape, str, str], Calibration] | None = None,
    ) -> None:
        self.root, self.device, self.fresh, self.measure_fn = root, device, fresh, measure_fn
        self._held: dict[tuple[EncoderShape, str, str], Calibration] = {}

    def get(self, shape: EncoderShape, dtype: str, attention: str) -> Calibration | None:
        """The calibration of ``shape``, ``dtype`` and ``attention``; None where there is none to
        measure (not a CPU, a dtype or attention not calibrated)."""
        if self.device != "cpu" or dtype not in DTYPES or attention not in ATTENTIONS:
            log.info("no calibrated time model for %s %s on %s", dtype, attention, self.device)
            return None
        key = (dataclasses.replace(shape, layers=0), dtype, attention)
        if key not in self._held:
            self._held[key] = load_or_measure(
                self.root, shape, dtype, attention, self.fresh, self.measure_fn
            )
        return self._held[key]
