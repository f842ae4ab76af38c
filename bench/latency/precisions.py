"""Several precisions in one `bench latency` run: ``--dtypes float32,bfloat16,int8``.

Comparing precisions across separate runs compares moments of a loaded machine, so only ratios
within a run can be trusted. With ``--dtypes`` every (ranker, configuration, precision) is one
entry of the same run, timed interleaved call by call with all the others under the same warm-up
protocol (:func:`bench.latency.protocol.time_parts`), so CROSS-JEM's lead in each precision and
each precision's gain for a ranker are ratios of calls that shared the machine's load.

A precision is a ``dtype`` and the ``runtime`` that scores in it (:class:`Precision`): written
``DTYPE`` (PyTorch) or ``DTYPE@RUNTIME`` (``float32@onnxruntime``, ``bfloat16@openvino``);
``int8`` alone is ONNX Runtime's, the one runtime with int8. Each timed ranker with a ``dtype``
option gets its entries once per precision, their columns and labels tagged with the precision's
name (``monobert @ bfloat16``, :func:`bench.latency.records.precision_column`); a ranker without
one (BM25) is timed once, untagged.

What cannot run is settled before any timing (:func:`plan_precisions`): a (ranker, precision)
pair the ranker cannot score in (the sentence-transformers peer has no int8; a runtime option a
layout does not run on) is skipped with a line saying why, as long as another timed ranker runs
that precision and the ranker runs another; a precision no timed ranker can run (int8 without
ONNX Runtime installed), or a ranker that runs none of them, is an error naming them. float16
on a CPU runs (PyTorch emulates it, slowly): it is timed, not refused.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.latency.records import LatencyRow, ListBlock, precision_column, speedup_summary
from rankers.base import RankerError, option_spec

if TYPE_CHECKING:
    from bench.latency.protocol import Entry

log = logging.getLogger(__name__)

#: the option that lists the precisions
OPTION = "--dtypes"
#: the default runtime: eager PyTorch
TORCH = "torch"
#: the precisions PyTorch scores in (``auto`` is no precision: float32 on a CPU, bf16 or fp16 on
#: a GPU; name the one meant)
TORCH_DTYPES = ("float32", "bfloat16", "float16")
#: the options a precision sets
PRECISION_OPTIONS = ("dtype", "runtime")
#: the precision whose gains are reported when it is timed (else the first listed)
REFERENCE = "float32"


@dataclass(frozen=True)
class Precision:
    """One precision of a run: the ``dtype`` option and the ``runtime`` that scores in it."""

    dtype: str
    runtime: str = TORCH

    @property
    def name(self) -> str:
        """How columns, labels and the record name it: ``bfloat16``; on another runtime as the
        encoder rankers' labels name it, ``onnxruntime int8``."""
        return self.dtype if self.runtime == TORCH else f"{self.runtime} {self.dtype}"

    def options(self, fields: Collection[str]) -> dict[str, str]:
        """The options that make a ranker whose config has the runtime options ``fields`` score
        in this precision."""
        return {"dtype": self.dtype, **({"runtime": self.runtime} if "runtime" in fields else {})}


def _runtime_dtypes(runtime: str) -> tuple[str, ...]:
    from rankers.runtimes import PRECISIONS

    if runtime == TORCH:
        return TORCH_DTYPES
    return tuple(d for d in PRECISIONS[runtime] if d != "auto")


def parse_precision(item: str) -> Precision:
    """``DTYPE`` or ``DTYPE@RUNTIME`` of ``--dtypes``; ValueError naming the item and the valid
    values."""
    from rankers.runtimes import RUNTIMES

    dtype, at, runtime = item.strip().partition("@")
    if not at:
        runtime = "onnxruntime" if dtype == "int8" else TORCH  # int8 runs on ONNX Runtime only
    if runtime not in RUNTIMES:
        raise ValueError(
            f"{OPTION} {item}: unknown runtime {runtime!r}; known: {', '.join(RUNTIMES)}"
        )
    valid = _runtime_dtypes(runtime)
    if dtype not in valid:
        hint = " (auto is float32 on a CPU: name the precision meant)" if dtype == "auto" else ""
        raise ValueError(
            f"{OPTION} {item}: {runtime} scores in {', '.join(valid)}, not {dtype!r}{hint}"
        )
    return Precision(dtype, runtime)


def parse_precisions(items: Sequence[str]) -> list[Precision]:
    """Every item of ``--dtypes``, in order; a precision given twice is an error."""
    out = [parse_precision(item) for item in items]
    if not out:
        raise ValueError(f"{OPTION}: name at least one precision, e.g. float32,bfloat16")
    names = [p.name for p in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{OPTION}: precision {twice[0]!r} is given twice")
    return out


@dataclass(frozen=True)
class Skip:
    """A (ranker, precision) pair left out, and why."""

    ranker: str
    precision: str
    why: str

    def line(self) -> str:
        return f"{self.ranker} is not timed in {self.precision}: {self.why}"


@dataclass
class PrecisionPlan:
    """What a ``--dtypes`` run times: per precision the rankers that run it (in ``--rankers``
    order), the rankers without a ``dtype`` option (timed once) and the pairs skipped."""

    precisions: list[Precision]
    takers: dict[str, list[str]]
    untyped: list[str]
    skipped: list[Skip] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.precisions]

    @property
    def reference(self) -> str:
        """The precision gains are measured against: float32 when timed, else the first."""
        return REFERENCE if REFERENCE in self.names else self.names[0]

    def config(self) -> dict[str, Any]:
        """What the record's config says: the precisions and the pairs skipped."""
        return {
            "precisions": self.names,
            "skipped": [dataclasses.asdict(s) for s in self.skipped],
        }


def _needs(cls: type, name: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """What option ``name`` of config ``cls`` declares it needs of the precision options
    (``int8_recipe`` needs ``dtype=int8``); empty for any other option."""
    found = {f.name: f for f in dataclasses.fields(cls)}.get(name)
    spec = option_spec(found) if found is not None else None
    return tuple((o, v) for o, v in spec.needs if o in PRECISION_OPTIONS) if spec else ()


def _fits(cls: type, name: str, chosen: Mapping[str, str]) -> bool:
    """Whether option ``name`` of config ``cls`` means something under the precision options
    ``chosen``: an option declared to need other values of ``dtype`` or ``runtime`` (int8's
    recipe) is given only to the precisions it applies to."""
    return all(chosen[o] in allowed for o, allowed in _needs(cls, name) if o in chosen)


def precision_free(ranker: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` less the options that need a precision (checked per precision by the
    plan): what a ``--dtypes`` run checks once for every precision."""
    from rankers import get_ranker_class

    cls = get_ranker_class(ranker).Config
    return {k: v for k, v in overrides.items() if not _needs(cls, k)}


def precision_options(
    ranker: str, overrides: Mapping[str, Any] | None, precision: Precision
) -> dict[str, Any]:
    """``overrides`` of ``ranker`` with the options of ``precision``, less those that need
    another precision (``int8_recipe`` is given to int8 rows only)."""
    from rankers import get_ranker_class

    cls = get_ranker_class(ranker).Config
    chosen = precision.options(cls.runtime_fields())
    kept = {k: v for k, v in (overrides or {}).items() if _fits(cls, k, chosen)}
    return {**kept, **chosen}


def _why_not(
    ranker: str, dataset: str, overrides: Any, precision: Precision, device: str
) -> str | None:
    """Why ``ranker`` cannot score in ``precision`` with ``overrides`` on ``device`` (None: it
    can); builds its config only (nothing is loaded)."""
    from bench.execution.ranker_settings import ranker_options
    from rankers import get_ranker_class

    cls = get_ranker_class(ranker).Config
    if precision.runtime != TORCH:
        if "runtime" not in cls.runtime_fields():
            return f"it scores in PyTorch only (no runtime option), not on {precision.runtime}"
        if device != "cpu":
            return f"{precision.runtime} runs on the CPU, not on device {device!r}"
    try:
        cls.from_options(
            ranker_options(ranker, dataset, precision_options(ranker, overrides, precision))
        )
    except (RankerError, ValueError, TypeError) as exc:
        return str(exc)
    return None


def check_no_precision_options(options: Mapping[str, Mapping[str, Any]]) -> None:
    """``--set`` dtype or runtime beside ``--dtypes``: an error naming both, since each row's
    precision comes from ``--dtypes``."""
    for name, overrides in options.items():
        for key in PRECISION_OPTIONS:
            if key in overrides:
                raise ValueError(
                    f"{OPTION} sets each row's {key}; drop --set {name}.{key}="
                    f"{overrides[key]} (write DTYPE@RUNTIME in {OPTION} for another runtime)"
                )


def plan_precisions(
    items: Sequence[str],
    rankers: Sequence[str],
    dataset: str,
    options: Mapping[str, Mapping[str, Any]],
    device: str = "cpu",
) -> PrecisionPlan:
    """Which ranker runs which precision of ``--dtypes`` ``items`` (``options``: per canonical
    ranker name, as :func:`bench.latency.protocol.canonical_keys` gives), checked before any work:
    ValueError for a bad item, a ``--set`` dtype or runtime beside it, a precision no timed
    ranker runs (each ranker's reason named) and a ranker that runs none of them; the other
    pairs a ranker cannot run are :attr:`PrecisionPlan.skipped`. ``device``: the resolved one."""
    from rankers import canonical_name, get_ranker_class

    precisions = parse_precisions(items)
    check_no_precision_options(options)
    timed = list(dict.fromkeys(canonical_name(r) for r in rankers))
    typed = [r for r in timed if "dtype" in get_ranker_class(r).Config.runtime_fields()]
    if not typed:
        raise ValueError(f"{OPTION}: none of the timed rankers ({', '.join(timed)}) has a dtype")
    plan = PrecisionPlan(precisions, {}, [r for r in timed if r not in typed])
    for p in precisions:
        why = {r: _why_not(r, dataset, options.get(r), p, device) for r in typed}
        plan.takers[p.name] = [r for r in typed if why[r] is None]
        if not plan.takers[p.name]:
            reasons = "; ".join(f"{r}: {text}" for r, text in why.items())
            raise ValueError(f"{OPTION} {p.name}: no timed ranker can run it ({reasons})")
        plan.skipped += [Skip(r, p.name, text) for r, text in why.items() if text is not None]
    for r in typed:
        if not any(r in takers for takers in plan.takers.values()):
            reasons = "; ".join(s.precision + ": " + s.why for s in plan.skipped if s.ranker == r)
            raise ValueError(f"{OPTION}: {r} runs none of {', '.join(plan.names)} ({reasons})")
    return plan


def tag_entry(entry: Entry, precision: str) -> Entry:
    """``entry`` of a run timing several precisions: its column tagged with ``precision``, its
    label too unless it already names it (the encoder rankers' labels name a runtime's
    precision: ``[pre-tokenised, onnxruntime int8]``)."""
    label = entry.label if precision in entry.label else precision_column(entry.label, precision)
    return dataclasses.replace(
        entry,
        label=label,
        column=precision_column(entry.column, precision),
        precision=precision,
    )


def gains(rows: Sequence[LatencyRow], n: int, precision: str, reference: str) -> dict[str, float]:
    """Per column (untagged) timed in both: the best ``reference`` row's mean time over the
    best ``precision`` row's at ``n``, how much faster the precision makes that ranker."""
    best = {
        (r.base_column, r.precision): r.latency["mean_ms"]
        for r in rows
        if r.n == n and r.best and r.precision in (precision, reference)
    }
    return {
        col: best[(col, reference)] / mean
        for (col, p), mean in best.items()
        if p == precision and (col, reference) in best and mean
    }


def precision_speedups(
    rows: Sequence[LatencyRow], block: ListBlock, plan: PrecisionPlan
) -> dict[str, dict[str, Any]]:
    """Per precision at ``block``'s N: CROSS-JEM's speed-up over monoBERT in that precision
    (:func:`~bench.latency.records.speedup_summary` of its columns, predictions included) and
    each ranker's ``gain`` over the reference precision (:func:`gains`)."""
    return {
        p: {
            **speedup_summary(rows, block, precision=p),
            "gain": gains(rows, block.n, p, plan.reference),
            "gain_over": plan.reference,
        }
        for p in plan.names
    }


def log_skips(plan: PrecisionPlan) -> None:
    """One warning line per (ranker, precision) pair left out, before any timing."""
    for skip in plan.skipped:
        log.warning("%s", skip.line())
