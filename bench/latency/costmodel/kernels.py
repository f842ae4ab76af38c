"""Kernel rates of this machine for the latency time model (:mod:`bench.latency.costmodel.time`):
one calibration record for every runtime, its cache key and file, the checks a cached file
passes, and the table of runtimes the model times (:data:`BACKENDS`).

A row's encoder runs on a runtime (PyTorch, ONNX Runtime) whose kernels speed up unlike each other
and unlike another runtime's, so its time is predicted from rates measured on this machine for
that runtime (:mod:`bench.latency.costmodel.probes` says how each is timed). A
:class:`Calibration` holds one runtime's rates in one ``dtype`` and ``setting`` (PyTorch: the
attention implementation; ONNX Runtime: the graph and the int8 recipe) for one encoder size and
thread count. Every runtime is one :class:`Backend` in :data:`BACKENDS`: what it calibrates, how
its file is named, which precision each weight MatMul of a layer runs in (int8 recipes keep some
in float32) and which attention rate a call reads. A runtime without an entry (OpenVINO) gets no
prediction; adding one (OpenVINO) is one more entry. Entries are per device: PyTorch on a CPU
and PyTorch on a CUDA GPU are two (:class:`CudaTorchBackend`: its kernels timed on the GPU, and
the fixed cost of an encoder call measured, which a GPU call pays before any FLOP).

A calibration depends on the CPU (on a GPU: the GPU's name), the runtime's version, the thread
count, the dtype, the setting, the encoder's dimensions and :data:`VERSION`, and is cached under
that key as
``<results root>/latency/calibration-<backend's name for it>-t<threads>-<hash>.json``, so it is
measured once per machine and setting (a few seconds); ``bench latency --calibrate`` measures it
anew. A cached file is read like every record (:func:`read_calibration`): a file that is not a
calibration of the setting asked for, or whose rates are implausible against the matmul peak
measured when it is read (:func:`implausible`), is named in a warning and measured anew, before
any timing (:func:`bench.latency.protocol.time_entries` asks for every calibration first).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import importlib.metadata
import json
import logging
import math
import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bench.core.io import atomic_write_json
from bench.latency.costmodel import probes
from bench.latency.costmodel.flops import EncoderShape
from bench.latency.costmodel.probes import (
    FLOAT32,
    IN_ATTENTION,
    KINDS,
    LayerPlan,
    attention_precision,
    layer_plans,
    matmul_kinds,
)
from bench.latency.records import LATENCY_DIR
from bench.results.records import config_hash
from rankers.compute.precision import INT8
from rankers.compute.runtimes import ONNX_GRAPHS, missing_packages

log = logging.getLogger(__name__)

#: bumped when what is measured or how it is stored changes, so older files are measured anew
VERSION = 2
TORCH = "torch"
CPU, CUDA = "cpu", "cuda"
#: a cached peak must lie within this factor of the peak measured when the file is read, and no
#: rate above it times that peak: rates x1000 (or a file of another machine) are measured anew.
#: Wide, since timings on a loaded machine swing and the 1024^3 matmul is not every dtype's
#: fastest kernel: on a 2-core CPU shared by other jobs, MiniLM's shape in float32 measured a
#: 26.8 GFLOP/s peak, a 245 GFLOP/s MatMul and, read back, a 15.8 GFLOP/s peak (15.5x below that
#: MatMul); in float16 (emulated) a 0.3 GFLOP/s peak, F.linear up to 3.9 and, read back, 0.1 (39x)
PEAK_FACTOR = 100.0
#: and no kernel below the measured peak divided by this (rates / 1000, times x1000)
SLOWEST = 1000.0


class CalibrationError(ValueError):
    """A calibration file that is not one: the message names the field and what is wrong."""


@dataclass
class Calibration:
    """Measured kernel rates of one machine, runtime, dtype, setting, thread count and encoder
    size (:class:`bench.latency.costmodel.probes.Rates`: ``linear`` precision -> ``"KxN"`` ->
    ``[[tokens, GFLOP/s], ...]``, ``attention`` rate name -> ``[[L, ms per row], ...]``)."""

    runtime: str
    dtype: str
    setting: dict[str, Any]
    threads: int
    hidden: int
    heads: int
    intermediate: int
    peak_gflops: float
    linear: dict[str, dict[str, list[list[float]]]]
    attention: dict[str, list[list[float]]]
    other_ns_per_token: float
    #: an encoder call's fixed cost: ms per call and per layer (0 on a CPU)
    call_ms: float = 0.0
    call_layer_ms: float = 0.0
    #: the kind of device its kernels ran on (:data:`CPU`, :data:`CUDA`)
    device: str = CPU
    runtime_version: str = ""
    machine: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    seconds: float = 0.0
    path: Path | None = field(default=None, compare=False)

    @property
    def backend(self) -> Backend:
        return BACKENDS[self.runtime, self.device]

    def summary(self) -> dict[str, Any]:
        """What a latency record keeps of the calibration it was predicted with."""
        return {
            # the file's name under the results root's latency/: a path would tie the record
            # to the machine it was made on
            "file": self.path.name if self.path else None,
            **self.backend.describe(self),
            "threads": self.threads,
            "peak_gflops": self.peak_gflops,
            "created": self.created,
        }

    def to_json(self) -> dict[str, Any]:
        """Every field but ``path`` (where it was read from, which would tie the file to one
        machine)."""
        out = dataclasses.asdict(self)
        out.pop("path")
        return out


# -- reading a cached file like every record -----------------------------------------------------
def _number(value: Any, where: str, zero: bool = False) -> float:
    """``value`` as a finite number above 0 (``zero``: at least 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CalibrationError(f"{where}: expected a finite number, not {value!r}")
    if value < 0 or (value == 0 and not zero):
        raise CalibrationError(f"{where}: expected a number above 0, not {value!r}")
    return float(value)


def _points(value: Any, where: str) -> list[list[float]]:
    """``[[x, y], ...]`` with x increasing, both positive."""
    if not isinstance(value, list) or not value:
        raise CalibrationError(f"{where}: expected a list of [x, value] points, not {value!r}")
    out = []
    for i, point in enumerate(value):
        if not isinstance(point, list) or len(point) != 2:
            raise CalibrationError(f"{where}[{i}]: expected [x, value], not {point!r}")
        out.append([_number(point[0], f"{where}[{i}][0]"), _number(point[1], f"{where}[{i}][1]")])
    if any(a[0] >= b[0] for a, b in zip(out, out[1:], strict=False)):
        raise CalibrationError(f"{where}: the points' x must increase")
    return out


#: the fields of a calibration file, by type
_FIELDS: dict[str, type] = {
    "runtime": str,
    "dtype": str,
    "setting": dict,
    "threads": int,
    "hidden": int,
    "heads": int,
    "intermediate": int,
    "runtime_version": str,
    "machine": dict,
    "created": str,
    "linear": dict,
    "attention": dict,
}
#: fields files written before them lack, and what they meant there
_OPTIONAL: dict[str, Any] = {"device": CPU, "call_ms": 0.0, "call_layer_ms": 0.0}


def read_calibration(data: Any, expected: Mapping[str, Any], needed: Needed) -> Calibration:
    """The calibration ``data`` holds (a parsed JSON file), checked like every record: an object
    with every field of its type, measured for what ``expected`` names (runtime, dtype, setting,
    threads, sizes: field -> value), every rate ``needed`` given as positive points.
    CalibrationError names the first field that is not so."""
    if not isinstance(data, dict):
        raise CalibrationError(f"expected a JSON object, not a {type(data).__name__}")
    data = {**_OPTIONAL, **data}
    if not isinstance(data["device"], str):
        raise CalibrationError(f"field 'device': expected a str, not {data['device']!r}")
    for name, kind in _FIELDS.items():
        value = data.get(name)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise CalibrationError(f"field {name!r}: expected a {kind.__name__}, not {value!r}")
    for name in ("peak_gflops", "other_ns_per_token"):
        _number(data.get(name), f"field {name!r}")
    for name in ("seconds", "call_ms", "call_layer_ms"):
        _number(data.get(name, 0.0), f"field {name!r}", zero=True)
    for name, want in expected.items():
        if data[name] != want:
            raise CalibrationError(f"field {name!r}: measured for {data[name]!r}, not {want!r}")
    for precision, shapes in sorted(needed.linear.items()):
        found = data["linear"].get(precision)
        if not isinstance(found, dict):
            raise CalibrationError(f"field 'linear.{precision}': missing")
        for k, n in sorted(shapes):
            if f"{k}x{n}" not in found:
                raise CalibrationError(f"field 'linear.{precision}.{k}x{n}': missing")
    for name in sorted(needed.attention):
        if name not in data["attention"]:
            raise CalibrationError(f"field 'attention.{name}': missing")
    for precision, shapes in data["linear"].items():
        if not isinstance(shapes, dict):
            raise CalibrationError(f"field 'linear.{precision}': expected an object")
        for kn, points in shapes.items():
            _points(points, f"field 'linear.{precision}.{kn}'")
    for name, points in data["attention"].items():
        _points(points, f"field 'attention.{name}'")
    names = {f.name for f in dataclasses.fields(Calibration)} - {"path"}
    return Calibration(**{k: v for k, v in data.items() if k in names})


def implausible(cal: Calibration, peak_gflops: float) -> str | None:
    """Why ``cal``'s rates cannot be this machine's, set against ``peak_gflops`` (its matmul peak
    in the calibration's dtype, measured now): the cached peak off by more than
    :data:`PEAK_FACTOR`; a MatMul rate above that factor times the peak or below the peak over
    :attr:`Backend.slowest` (:data:`SLOWEST` on a CPU); the attention and the other work
    (counted as ``4 L^2 d`` FLOPs per row, and 10 per hidden and 8 per feed-forward value per
    token) ten times further either way, since they are no MatMuls (a kernel that is not
    emulated may outrun an emulated bf16 MatMul). None: plausible."""
    high = peak_gflops * PEAK_FACTOR
    if not peak_gflops / PEAK_FACTOR <= cal.peak_gflops <= high:
        return f"field 'peak_gflops': {cal.peak_gflops:g} GFLOP/s, measured now {peak_gflops:g}"
    rates: list[tuple[str, float, float]] = [
        (f"linear.{p}.{kn}.{int(t)}", rate, 1.0)
        for p, shapes in cal.linear.items()
        for kn, points in shapes.items()
        for t, rate in points
    ]
    for name, points in cal.attention.items():
        for length, ms in points:
            flops = 4 * length**2 * cal.hidden
            rates.append((f"attention.{name}.{int(length)}", flops / ms / 1e6, 10.0))
    other = (10 * cal.hidden + 8 * cal.intermediate) / cal.other_ns_per_token
    rates.append(("other_ns_per_token", other, 10.0))
    for name, rate, room in rates:
        low, top = peak_gflops / cal.backend.slowest / room, high * room
        if not low <= rate <= top:
            return (
                f"field {name!r}: {rate:g} GFLOP/s, outside {low:g}-{top:g} (from the matmul "
                f"peak measured now, {peak_gflops:g} GFLOP/s)"
            )
    return None


# -- the runtimes ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Needed:
    """The rates a calibration holds: precision -> weight shapes ``(k, n)`` timed as MatMuls,
    and the names of its attention rates."""

    linear: dict[str, set[tuple[int, int]]]
    attention: set[str]


class Backend:
    """One runtime the time model predicts: what it calibrates and how its rates are read. The
    base is the layer every runtime shares; a runtime overrides what differs."""

    name: ClassVar[str]
    #: the dtypes it is calibrated in
    precisions: ClassVar[tuple[str, ...]]
    #: the kind of device it runs on (:data:`CPU`, :data:`CUDA`)
    device: ClassVar[str] = CPU
    #: no kernel rate below the measured peak divided by this (:func:`implausible`)
    slowest: ClassVar[float] = SLOWEST

    def version(self) -> str | None:
        raise NotImplementedError

    def machine(self, device: str) -> dict[str, Any]:
        """What its rates depend on of the machine with ``device``: the CPU's model."""
        return {"cpu": cpu_model()}

    def unavailable(self, dtype: str) -> list[str]:
        """Packages missing to calibrate ``dtype`` (empty: none)."""
        return []

    def setting(self, work: Mapping[str, Any], attention: str) -> dict[str, Any] | None:
        """What its rates depend on besides the dtype, for a row's encoder ``work``
        (:func:`bench.latency.protocol.encoder_work`) and a call's ``attention``; None: nothing
        is calibrated for it."""
        raise NotImplementedError

    def file_stem(self, dtype: str, setting: Mapping[str, Any]) -> str:
        raise NotImplementedError

    def layer_plans(self, cal: Calibration, layers: int) -> list[tuple[LayerPlan, int]]:
        """The distinct precisions of ``layers`` layers' weight MatMuls from layer 0, each with
        how many layers have it. Default: every MatMul in the calibration's dtype."""
        return [(dict.fromkeys(KINDS, cal.dtype), layers)]

    def in_attention(self, cal: Calibration) -> tuple[str, ...]:
        """The MatMul kinds its attention rate includes (timed there, not as MatMuls)."""
        return ()

    def attention_rate(self, cal: Calibration, plan: LayerPlan, masked: bool) -> str:
        raise NotImplementedError

    def needed(self, shape: EncoderShape, dtype: str, setting: Mapping[str, Any]) -> Needed:
        raise NotImplementedError

    def rates(
        self,
        shape: EncoderShape,
        dtype: str,
        setting: Mapping[str, Any],
        threads: int,
        device: str = CPU,
    ) -> probes.Rates:
        raise NotImplementedError

    def peak(self, dtype: str, threads: int, device: str = CPU) -> float:
        raise NotImplementedError

    def describe(self, cal: Calibration) -> dict[str, Any]:
        """What a record says of the calibration besides its file, threads, peak and date."""
        raise NotImplementedError


def _shapes(shape: EncoderShape, skip: tuple[str, ...] = ()) -> set[tuple[int, int]]:
    return {(k, n) for kind, (k, n, _) in matmul_kinds(shape).items() if kind not in skip}


class TorchBackend(Backend):
    """Eager PyTorch: every MatMul in the scoring dtype, attention masked or not."""

    name = TORCH
    precisions: ClassVar[tuple[str, ...]] = probes.TORCH_DTYPES

    def version(self) -> str | None:
        import torch

        return str(torch.__version__)

    def setting(self, work: Mapping[str, Any], attention: str) -> dict[str, Any] | None:
        return {"attention": attention} if attention in probes.ATTENTIONS else None

    def file_stem(self, dtype: str, setting: Mapping[str, Any]) -> str:
        return dtype

    def attention_rate(self, cal: Calibration, plan: LayerPlan, masked: bool) -> str:
        return "masked" if masked else "unmasked"

    def needed(self, shape: EncoderShape, dtype: str, setting: Mapping[str, Any]) -> Needed:
        return Needed({dtype: _shapes(shape)}, {"masked", "unmasked"})

    def rates(
        self,
        shape: EncoderShape,
        dtype: str,
        setting: Mapping[str, Any],
        threads: int,
        device: str = CPU,
    ) -> probes.Rates:
        shapes = sorted(_shapes(shape))
        return probes.torch_rates(shape, dtype, shapes, str(setting["attention"]))

    def peak(self, dtype: str, threads: int, device: str = CPU) -> float:
        return probes.torch_peak(dtype)

    def describe(self, cal: Calibration) -> dict[str, Any]:
        return {"dtype": cal.dtype, "attention": cal.setting["attention"]}


class CudaTorchBackend(TorchBackend):
    """Eager PyTorch on a CUDA GPU (``tf32`` included): its kernels timed there
    (:func:`bench.latency.costmodel.probes.cuda_probe`), keyed by the GPU's name, and the fixed
    cost of an encoder call measured (:func:`bench.latency.costmodel.probes.torch_call_ms`),
    which a GPU call pays before any FLOP (launches, host work, the wait)."""

    device = CUDA
    precisions = probes.CUDA_DTYPES
    #: a GPU's small kernels are bound by their launch, thousands of times below its peak
    slowest = 100 * SLOWEST

    def version(self) -> str | None:
        import torch

        return f"{torch.__version__} cuda {torch.version.cuda}"

    def machine(self, device: str) -> dict[str, Any]:
        import torch

        return {"gpu": torch.cuda.get_device_name(device)}

    def file_stem(self, dtype: str, setting: Mapping[str, Any]) -> str:
        return f"cuda-{dtype}"

    def rates(
        self,
        shape: EncoderShape,
        dtype: str,
        setting: Mapping[str, Any],
        threads: int,
        device: str = CUDA,
    ) -> probes.Rates:
        attention = str(setting["attention"])
        probe = probes.cuda_probe(device)
        rates = probes.torch_rates(shape, dtype, sorted(_shapes(shape)), attention, probe)
        rates.call_ms, rates.call_layer_ms = probes.torch_call_ms(shape, dtype, attention, device)
        return rates

    def peak(self, dtype: str, threads: int, device: str = CUDA) -> float:
        return probes.torch_peak(dtype, probes.cuda_probe(device))

    def describe(self, cal: Calibration) -> dict[str, Any]:
        return {**super().describe(cal), "gpu": cal.machine.get("gpu")}


class OnnxRuntimeBackend(Backend):
    """ONNX Runtime (``--set runtime=onnxruntime``, int8 included): each weight MatMul in the
    precision its int8 recipe gives it; the attention rate in the precision of what it runs,
    padded or not alike (both graphs always apply the mask). Calls are assumed to start at
    layer 0 (every runtime call does: a runtime refuses ``merge_layers``)."""

    name = "onnxruntime"
    precisions = (FLOAT32, INT8)

    def version(self) -> str | None:
        try:
            return importlib.metadata.version("onnxruntime")
        except importlib.metadata.PackageNotFoundError:
            return None

    def unavailable(self, dtype: str) -> list[str]:
        return list(missing_packages(self.name, dtype))

    def setting(self, work: Mapping[str, Any], attention: str) -> dict[str, Any] | None:
        graph = str(work.get("graph"))
        if graph not in ONNX_GRAPHS:
            return None
        recipe = work.get("int8_recipe") if work.get("dtype") == INT8 else None
        return {"graph": graph, "int8_recipe": recipe}

    def file_stem(self, dtype: str, setting: Mapping[str, Any]) -> str:
        recipe = f"-{setting['int8_recipe']}" if setting["int8_recipe"] else ""
        return f"{self.name}-{dtype}{recipe}-{setting['graph']}"

    def layer_plans(self, cal: Calibration, layers: int) -> list[tuple[LayerPlan, int]]:
        return layer_plans(cal.dtype, cal.setting["int8_recipe"], layers)

    def in_attention(self, cal: Calibration) -> tuple[str, ...]:
        return IN_ATTENTION[cal.setting["graph"]]

    def attention_rate(self, cal: Calibration, plan: LayerPlan, masked: bool) -> str:
        return attention_precision(cal.setting["graph"], plan)

    def needed(self, shape: EncoderShape, dtype: str, setting: Mapping[str, Any]) -> Needed:
        """Layer 0 and one later layer cover every recipe."""
        graph = setting["graph"]
        linear: dict[str, set[tuple[int, int]]] = {}
        attention: set[str] = set()
        for plan, _ in layer_plans(dtype, setting["int8_recipe"], 2):
            for kind, (k, n, _count) in matmul_kinds(shape).items():
                if kind not in IN_ATTENTION[graph]:
                    linear.setdefault(plan[kind], set()).add((k, n))
            attention.add(attention_precision(graph, plan))
        return Needed(linear, attention)

    def rates(
        self,
        shape: EncoderShape,
        dtype: str,
        setting: Mapping[str, Any],
        threads: int,
        device: str = CPU,
    ) -> probes.Rates:
        need = self.needed(shape, dtype, setting)
        graph = str(setting["graph"])
        return probes.ort_rates(shape, dtype, need.linear, need.attention, graph, threads)

    def peak(self, dtype: str, threads: int, device: str = CPU) -> float:
        return probes.ort_peak(dtype, threads)

    def describe(self, cal: Calibration) -> dict[str, Any]:
        return {
            "runtime": f"{cal.runtime} {cal.runtime_version}".strip(),
            "dtype": cal.dtype,
            "int8_recipe": cal.setting["int8_recipe"],
            "graph": cal.setting["graph"],
        }


#: the runtimes the time model predicts, by the name a row's encoder work gives (``runtime``,
#: PyTorch when absent) and the kind of device (:func:`device_kind`); a runtime without an
#: entry gets FLOPs and achieved GFLOP/s only
BACKENDS: dict[tuple[str, str], Backend] = {
    (b.name, b.device): b for b in (TorchBackend(), CudaTorchBackend(), OnnxRuntimeBackend())
}
#: the runtimes with an entry on some device
RUNTIMES = frozenset(name for name, _ in BACKENDS)


def device_kind(device: str) -> str:
    """:data:`CUDA` for ``cuda`` and ``cuda:N``, else the device as given."""
    return CUDA if device.startswith(CUDA) else device


def backend_for(runtime: str, device: str) -> Backend | None:
    """The entry of ``runtime`` on ``device`` (None: no time model there)."""
    return BACKENDS.get((runtime, device_kind(device)))


# -- key, file, measuring, loading ---------------------------------------------------------------
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


def calibration_key(
    runtime: str,
    dtype: str,
    setting: Mapping[str, Any],
    threads: int,
    shape: EncoderShape,
    device: str = CPU,
) -> dict[str, Any]:
    """Everything a calibration's rates depend on (on a CPU, as before the GPU had an entry)."""
    backend = BACKENDS[runtime, device_kind(device)]
    return {
        "runtime": runtime,
        "runtime_version": backend.version(),
        **backend.machine(device),
        "threads": threads,
        "dtype": dtype,
        **setting,
        "hidden": shape.hidden,
        "heads": shape.heads,
        "intermediate": shape.intermediate,
        "version": VERSION,
    }


def calibration_path(
    root: Path, key: Mapping[str, Any], setting: Mapping[str, Any], device: str = CPU
) -> Path:
    stem = BACKENDS[key["runtime"], device_kind(device)].file_stem(key["dtype"], setting)
    return (
        root / LATENCY_DIR / f"calibration-{stem}-t{key['threads']}-{config_hash(dict(key))}.json"
    )


def measure_calibration(
    runtime: str, shape: EncoderShape, dtype: str, setting: Mapping[str, Any], device: str = CPU
) -> Calibration:
    """Measure every rate ``runtime`` needs on ``device`` in ``dtype`` and ``setting`` at this
    process's torch thread count, which the rankers give their sessions too (some seconds)."""
    import torch

    backend = BACKENDS[runtime, device_kind(device)]
    if dtype not in backend.precisions:
        raise ValueError(
            f"no {runtime} calibration for dtype {dtype!r}; known: {', '.join(backend.precisions)}"
        )
    threads = torch.get_num_threads()
    start = time.perf_counter()
    rates = backend.rates(shape, dtype, setting, threads, device)
    return Calibration(
        runtime=runtime,
        dtype=dtype,
        setting=dict(setting),
        threads=threads,
        hidden=shape.hidden,
        heads=shape.heads,
        intermediate=shape.intermediate,
        **dataclasses.asdict(rates),
        device=backend.device,
        runtime_version=backend.version() or "",
        seconds=time.perf_counter() - start,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )


def measure_peak(runtime: str, dtype: str, device: str = CPU) -> float:
    """The matmul peak of ``runtime`` on ``device`` in ``dtype`` now, which a cached file is
    checked against."""
    import torch

    return BACKENDS[runtime, device_kind(device)].peak(dtype, torch.get_num_threads(), device)


#: measure(runtime, shape, dtype, setting, device): what :class:`Calibrations` calls to measure
MeasureFn = Callable[[str, EncoderShape, str, Mapping[str, Any], str], Calibration]
#: peak(runtime, dtype, device): the matmul peak measured now
PeakFn = Callable[[str, str, str], float]


def _cached(
    path: Path,
    key: Mapping[str, Any],
    expected: Mapping[str, Any],
    needed: Needed,
    peak: Callable[[], float],
) -> Calibration | None:
    """The calibration at ``path`` when it is one of ``key`` (:func:`read_calibration` with
    ``expected`` and ``needed``) with plausible rates; else None, a warning naming the file and
    the field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        cal = read_calibration(data, expected, needed)
        if cal.machine != json.loads(json.dumps(dict(key))):
            raise CalibrationError("field 'machine': measured under another key")
        why = implausible(cal, peak())
        if why:
            raise CalibrationError(why)
    except (OSError, ValueError) as exc:  # JSONDecodeError and CalibrationError are ValueErrors
        log.warning("measuring anew: %s is not a usable calibration: %s", path, exc)
        return None
    cal.path = path
    log.debug("calibration from %s", path)
    return cal


def load_or_measure(
    root: Path,
    shape: EncoderShape,
    runtime: str,
    dtype: str,
    setting: Mapping[str, Any],
    *,
    device: str = CPU,
    fresh: bool = False,
    measure_fn: MeasureFn | None = None,
    peak_fn: PeakFn | None = None,
) -> Calibration:
    """The cached calibration of this machine, ``device`` and setting, measured (and cached)
    when there is none, the file is not a usable one, or ``fresh``; ``measure_fn`` and
    ``peak_fn`` measure (default :func:`measure_calibration`, :func:`measure_peak`; tests pass
    fakes)."""
    import torch

    backend = BACKENDS[runtime, device_kind(device)]
    key = calibration_key(runtime, dtype, setting, torch.get_num_threads(), shape, device)
    path = calibration_path(root, key, setting, device)
    if path.is_file() and not fresh:
        expected = {
            "runtime": runtime,
            "device": backend.device,
            "dtype": dtype,
            "setting": dict(setting),
            "threads": key["threads"],
            "hidden": shape.hidden,
            "heads": shape.heads,
            "intermediate": shape.intermediate,
        }
        needed = backend.needed(shape, dtype, setting)
        found = _cached(
            path, key, expected, needed, lambda: (peak_fn or measure_peak)(runtime, dtype, device)
        )
        if found is not None:
            return found
    what = ", ".join(f"{k} {v}" for k, v in setting.items() if v is not None)
    log.info(
        "calibrating %s %s kernels on %s (%s, %d thread(s))",
        runtime,
        dtype,
        device,
        what,
        key["threads"],
    )
    cal = (measure_fn or measure_calibration)(runtime, shape, dtype, setting, device)
    cal.machine = dict(key)
    atomic_write_json(path, cal.to_json())
    cal.path = path
    log.info("calibration (%.1f s) written to %s", cal.seconds, path)
    return cal
