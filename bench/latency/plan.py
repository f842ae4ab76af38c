"""What `bench latency` times: its options, the encoder size, the precisions and the entries.

Per N and ranker (:func:`bench.latency.benchmark.run_benchmark` drives it): each ranker of
``--rankers`` is created with its resolved options and asked for its
:meth:`~rankers.hooks.LatencyParts.latency_variants` (batch sizes, scoring modes); every variant is
one :class:`Entry`, which :mod:`bench.latency.protocol` creates, indexes and times. Nothing here
knows a ranker by name: what differs per ranker comes from its hooks.

``--arch`` times paper-size encoders (:data:`ARCHS`): a BERT of the preset's size with random
weights (a forward pass costs the same whatever the weights) is written once under
``results/models/random/`` and given as ``model`` to every ranker that has one; records made so
say so (:func:`random_weights_note`).

**Several precisions in one run** (``--dtypes float32,bfloat16,int8``). Comparing precisions
across separate runs compares moments of a loaded machine, so only ratios within a run can be
trusted. With ``--dtypes`` every (ranker, configuration, precision) is one entry of the same run,
timed interleaved call by call with all the others under the same warm-up protocol
(:func:`bench.latency.protocol.time_parts`), so CROSS-JEM's lead in each precision and each
precision's gain for a ranker are ratios of calls that shared the machine's load.

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
from pathlib import Path
from typing import Any

from bench.data.model import CandidateList, RankingSplit
from bench.execution.context import RunContext
from bench.execution.policy import ALL, DEFAULT_BATCH_SIZES, DEFAULT_RANKERS, BatchSize
from bench.latency.records import precision_column
from rankers.base import Ranker, RankerConfig, RankerError, option_spec
from rankers.hooks import latency_parts

log = logging.getLogger(__name__)


# -- the encoder size ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ArchPreset:
    """A BERT shape to time with random weights (timing does not depend on the weights)."""

    layers: int
    hidden: int
    heads: int
    intermediate: int


DEFAULT_ARCH = "minilm-l6"
#: ``--arch`` presets; None: the rankers' configured (real, pre-trained) weights
ARCHS: dict[str, ArchPreset | None] = {
    "minilm-l6": None,
    "distilbert-6l": ArchPreset(layers=6, hidden=768, heads=12, intermediate=3072),
    "bert-base": ArchPreset(layers=12, hidden=768, heads=12, intermediate=3072),
}


def random_weights_note(arch: str) -> str:
    return f"random weights, timing only ({arch})"


def arch_model(arch: str, seed: int, root: Path) -> Path | None:
    """The folder of ``arch``'s random-weight BERT (written on first use), or None for the
    rankers' configured weights. Vocabulary and tokenizer are MiniLM-L6's."""
    preset = ARCHS[arch]
    if preset is None:
        return None
    from rankers.io.models import write_random_bert

    folder = root / "models" / "random" / f"{arch}-seed{seed}"
    return write_random_bert(folder, **dataclasses.asdict(preset), seed=seed)


# -- precisions ---------------------------------------------------------------------------------
#: the option that lists the precisions
OPTION = "--dtypes"
#: the default runtime: eager PyTorch
TORCH = "torch"
#: the precisions PyTorch scores in (``auto`` is no precision: float32 on a CPU, bf16 or fp16 on
#: a GPU; name the one meant)
TORCH_DTYPES = ("float32", "tf32", "bfloat16", "float16")
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
    from rankers.compute.runtimes import PRECISIONS

    if runtime == TORCH:
        return TORCH_DTYPES
    return tuple(d for d in PRECISIONS[runtime] if d != "auto")


def parse_precision(item: str) -> Precision:
    """``DTYPE`` or ``DTYPE@RUNTIME`` of ``--dtypes``; ValueError naming the item and the valid
    values."""
    from rankers.compute.runtimes import RUNTIMES

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
        return {"precisions": self.names, "skipped": [dataclasses.asdict(s) for s in self.skipped]}


def _needs(cls: type, name: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """What option ``name`` of config ``cls`` declares it needs of the precision options
    (``int8_recipe`` needs ``dtype=int8``); empty for any other option."""
    found = {f.name: f for f in dataclasses.fields(cls)}.get(name)
    spec = option_spec(found) if found is not None else None
    if spec is None:
        return ()
    return tuple((o, v) for o, v in spec.needs if o in PRECISION_OPTIONS and isinstance(v, tuple))


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
    if precision.runtime != TORCH:  # (a torch precision's device: device_refusal)
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


def device_refusal(precision: Precision, device: str) -> str | None:
    """Why no ranker can score in ``precision`` on ``device`` (None: the device has it):
    ``tf32`` on a device without TF32 matmuls
    (:func:`rankers.compute.precision.check_dtype_device`)."""
    from rankers.compute.precision import check_dtype_device

    if precision.runtime != TORCH:
        return None
    try:
        check_dtype_device(precision.dtype, device)
    except RankerError as exc:
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
    ranker name, as :func:`canonical_keys` gives), checked before any work:
    ValueError for a bad item, a ``--set`` dtype or runtime beside it, a precision no timed
    ranker runs (each ranker's reason named) and a ranker that runs none of them; the other
    pairs a ranker cannot run are :attr:`PrecisionPlan.skipped`, and so is a precision the
    device lacks (:func:`device_refusal`) while another one runs. ``device``: the resolved
    one."""
    from rankers import canonical_name, get_ranker_class

    precisions = parse_precisions(items)
    check_no_precision_options(options)
    timed = list(dict.fromkeys(canonical_name(r) for r in rankers))
    typed = [r for r in timed if "dtype" in get_ranker_class(r).Config.runtime_fields()]
    if not typed:
        raise ValueError(f"{OPTION}: none of the timed rankers ({', '.join(timed)}) has a dtype")
    refused = {p.name: device_refusal(p, device) for p in precisions}
    runnable = [p for p in precisions if refused[p.name] is None]
    if not runnable:  # nothing to time: the first refusal says why
        raise ValueError(f"{OPTION} {','.join(refused)}: {next(iter(refused.values()))}")
    plan = PrecisionPlan(runnable, {}, [r for r in timed if r not in typed])
    # a precision this device lacks (tf32 on a CPU) is left out for every ranker, with a line
    plan.skipped += [Skip(r, n, text) for n, text in refused.items() if text for r in typed]
    for p in runnable:
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
        entry, label=label, column=precision_column(entry.column, precision), precision=precision
    )


# -- options and entries --------------------------------------------------------------------------
@dataclass
class BenchOptions:
    """Everything `bench latency` takes; :meth:`validate` checks it before any work."""

    dataset: str
    split: str | None = None
    n_values: Sequence[int] = (30, 100)
    rankers: Sequence[str] = DEFAULT_RANKERS
    batch_queries: int = 1
    #: lists timed per N: the first ``queries`` queries of the split (None: all)
    queries: int | None = 20
    repeats: int = 3
    warmup: int = 3
    device: str = "cpu"
    threads: int | None = 2
    seed: int = 0
    #: ranker name -> batch sizes to time (``"all"``: a call's pairs in one pass), given to the
    #: ranker's latency_variants(); a ranker without an entry gets latency_variants(None)
    batch_sizes: Mapping[str, Sequence[BatchSize]] = field(
        default_factory=lambda: dict(DEFAULT_BATCH_SIZES)
    )
    #: encoder to time: a key of :data:`ARCHS`
    arch: str = DEFAULT_ARCH
    #: ranker name -> save() folder of trained weights (latency needs none)
    checkpoints: Mapping[str, str] = field(default_factory=dict)
    #: ranker name -> option overrides (like `bench run --set`)
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    data_dir: str | Path | None = None
    results_dir: str | Path | None = None
    #: measure the kernel rates of the time model anew (:mod:`bench.latency.costmodel.kernels`)
    #: instead of reading the cached calibration
    calibrate: bool = False
    #: ``--dtypes``: precisions (``DTYPE`` or ``DTYPE@RUNTIME``) timed interleaved in this one
    #: run (the precisions above); empty: each ranker in its own ``dtype`` option
    dtypes: Sequence[str] = ()
    #: ``--profile``: after the timing, one profiled pass per entry over its calls
    #: (:func:`bench.latency.protocol.profile_entry`), stored in its row
    profile: bool = False

    def context(self) -> RunContext:
        """The run context of these options, resolved once (device, threads set now, seed,
        roots)."""
        return RunContext.of(self)

    def validate(self) -> None:
        """Raise ValueError (RankerError for an unknown ranker) naming the bad option."""
        from rankers import canonical_name

        if not self.n_values:
            raise ValueError("--n-items: give at least one list size N")
        for n in self.n_values:
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"--n-items: list sizes must be integers >= 1, not {n!r}")
        for name, value, low in (
            ("--batch-queries", self.batch_queries, 1),
            ("--queries", self.queries, 1),
            ("--repeats", self.repeats, 1),
            ("--warmup", self.warmup, 0),
            ("--threads", self.threads, 1),
        ):
            if value is not None and value < low:
                raise ValueError(f"{name} must be >= {low}, not {value}")
        if self.arch not in ARCHS:
            raise ValueError(f"--arch {self.arch!r} is unknown; known: {', '.join(ARCHS)}")
        trained = self.checkpoints or any("checkpoint" in o for o in self.options.values())
        if ARCHS[self.arch] is not None and trained:
            raise ValueError(
                f"--arch {self.arch} times random weights; it cannot be combined with "
                "trained checkpoints"
            )
        if not self.rankers:
            raise ValueError("--rankers: name at least one ranker")
        for name in [*self.rankers, *self.batch_sizes, *self.options, *self.checkpoints]:
            canonical_name(name)
        from bench.execution.ranker_settings import ranker_options
        from rankers import get_ranker_class

        for name in self.rankers:
            untimed = get_ranker_class(canonical_name(name)).untimed
            if untimed:
                raise ValueError(f"--rankers {name}: bench latency cannot time it: {untimed}")

        for name, overrides in self.options.items():
            several = str(overrides.get("dtype", "")).split(",")
            if len(several) > 1:
                raise ValueError(
                    f"--set {name}.dtype={overrides['dtype']}: one dtype per --set; time several "
                    f"precisions in one run with --dtypes {','.join(several)}"
                )
        if self.dtypes:
            check_no_precision_options(canonical_keys(self.options))
        for name, overrides in self.options.items():  # bad values fail here, not mid-benchmark
            key = canonical_name(name)
            if self.dtypes:  # options that need one precision are checked in it (the plan)
                overrides = precision_free(key, overrides)
            get_ranker_class(key).Config.from_options(ranker_options(key, self.dataset, overrides))
            self._check_device_dtype(name, overrides)
        for name, sizes in self.batch_sizes.items():
            resolve_batch_sizes(sizes, 1, owner=name)
        self.precision_plan()

    def _check_device_dtype(self, name: str, overrides: Mapping[str, Any]) -> None:
        """``--set NAME.dtype=tf32`` on a device without TF32: a ValueError naming the option."""
        if "dtype" not in overrides:
            return
        from bench.core.device import resolve_device

        why = device_refusal(Precision(str(overrides["dtype"])), resolve_device(self.device))
        if why:
            raise ValueError(f"--set {name}.dtype={overrides['dtype']}: {why}")

    def precision_plan(self) -> PrecisionPlan | None:
        """Which ranker is timed in which precision of :attr:`dtypes` (None without them),
        checked without loading anything: :func:`plan_precisions`."""
        if not self.dtypes:
            return None
        from bench.core.device import resolve_device

        device = resolve_device(self.device)
        options = canonical_keys(self.options)
        return plan_precisions(self.dtypes, self.rankers, self.dataset, options, device)


def options_per_ranker(
    sets: Mapping[str, str], rankers: Sequence[str]
) -> dict[str, dict[str, str]]:
    """``--set`` pairs of `bench latency` as option overrides per ranker: ``RANKER.KEY`` sets
    that ranker's option, a bare ``KEY`` every timed ranker whose config declares it (e.g.
    ``order=concat`` times CROSS-JEM in that layout). A key no timed ranker has is an error
    naming it, before any work."""
    from rankers import canonical_name, get_ranker_class

    timed = [canonical_name(r) for r in rankers]
    out: dict[str, dict[str, str]] = {}
    for key, value in sets.items():
        name, dot, option = key.rpartition(".")
        owners = [canonical_name(name)] if dot else timed
        takers = [r for r in owners if option in config_fields(get_ranker_class(r).Config)]
        if not takers:
            where = f"ranker {owners[0]}" if dot else f"the timed rankers ({', '.join(timed)})"
            raise ValueError(f"--set {key}={value}: no option {option!r} in {where}")
        for r in takers:
            out.setdefault(r, {})[option] = value
    return out


def resolve_batch_sizes(sizes: Sequence[BatchSize], everything: int, owner: str = "") -> list[int]:
    """Batch sizes as integers, ``"all"`` replaced by ``everything`` (the pairs of one call),
    duplicates dropped in order."""
    out = []
    for bs in sizes:
        if bs == ALL:
            out.append(everything)
            continue
        try:
            value = int(bs)
        except (TypeError, ValueError):
            value = 0
        if isinstance(bs, bool) or value < 1:
            where = f" for {owner}" if owner else ""
            raise ValueError(f"batch size{where} must be an integer >= 1 or {ALL!r}, not {bs!r}")
        out.append(value)
    return list(dict.fromkeys(out))


def config_fields(config_cls: type[RankerConfig]) -> set[str]:
    return {f.name for f in dataclasses.fields(config_cls)}


def canonical_keys(mapping: Mapping[str, Any]) -> dict[str, Any]:
    from rankers import canonical_name

    return {canonical_name(k): v for k, v in mapping.items()}


# -- what is timed -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One timed configuration: its row label, the registered ranker and the options that make
    it, and its table column (the fastest row of a column is the column's figure); in a run
    timing several precisions, the precision's name (the precisions above)."""

    label: str
    ranker: str
    options: dict[str, Any] = field(default_factory=dict)
    column: str = ""
    precision: str = ""


def entries_for(
    rankers: Sequence[str],
    dataset: str,
    n: int,
    batch_queries: int,
    *,
    batch_sizes: Mapping[str, Sequence[BatchSize]] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Entry]:
    """The rows to time at list size ``n``: for each ranker, its resolved options (config file,
    then ``options``; ``batch_queries`` when its config has that field) and one entry per
    :meth:`~rankers.hooks.LatencyParts.latency_variants` (creating a ranker loads nothing)."""
    from bench.execution.ranker_settings import ranker_options
    from rankers import canonical_name, get_ranker_class

    options = canonical_keys(options or {})
    sizes = canonical_keys(batch_sizes or {})
    out: list[Entry] = []
    for key in dict.fromkeys(canonical_name(name) for name in rankers):
        cls = get_ranker_class(key)
        base = ranker_options(key, dataset, options.get(key))
        if "batch_queries" in config_fields(cls.Config):
            base["batch_queries"] = batch_queries
        ranker = cls(cls.Config.from_options(base), device="cpu")
        wanted = resolve_batch_sizes(sizes[key], n * batch_queries, key) if key in sizes else None
        for variant in latency_parts(ranker).latency_variants(wanted):
            out.append(Entry(variant.label, key, {**base, **variant.options}, variant.column))
    return out


def precision_entries(
    plan: PrecisionPlan,
    dataset: str,
    n: int,
    batch_queries: int,
    *,
    batch_sizes: Mapping[str, Sequence[BatchSize]] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Entry]:
    """The entries of a ``--dtypes`` run at list size ``n``: the rankers without a dtype once,
    then per precision (in ``--dtypes`` order) the entries of every ranker that runs it
    (:func:`entries_for` with the precision's options), tagged."""
    options = canonical_keys(options or {})
    out = entries_for(
        plan.untyped, dataset, n, batch_queries, batch_sizes=batch_sizes, options=options
    )
    for p in plan.precisions:
        takers = plan.takers[p.name]
        chosen = {r: precision_options(r, options.get(r), p) for r in takers}
        found = entries_for(
            takers, dataset, n, batch_queries, batch_sizes=batch_sizes, options=chosen
        )
        out += [tag_entry(e, p.name) for e in found]
    return out


def with_latency_defaults(
    options: Mapping[str, Mapping[str, Any]], rankers: Sequence[str], checkpoints: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """``options`` (per canonical ranker name) over each ranker's
    :attr:`~rankers.base.Ranker.latency_defaults` (CROSS-JEM: ``union_len=auto``), which take the
    place of the settings file's values where ``--set`` gives none; a ranker timed with trained
    weights keeps the settings its checkpoint was trained with."""
    from rankers import get_ranker_class

    out = {k: dict(v) for k, v in options.items()}
    for name in dict.fromkeys(rankers):
        given = out.get(name, {})
        if checkpoint_for(name, checkpoints) or given.get("checkpoint"):
            continue
        defaults = get_ranker_class(name).latency_defaults
        if defaults:
            out[name] = {**defaults, **given}
    return out


def chosen_options(
    rankers: Sequence[str],
    dataset: str,
    options: Mapping[str, Mapping[str, Any]],
    lists: Sequence[CandidateList],
    device: str = "cpu",
) -> dict[str, dict[str, Any]]:
    """Per ranker of ``rankers`` whose options leave something to choose from the lists timed
    (:meth:`~rankers.hooks.LatencyParts.chosen_options`: CROSS-JEM's ``union_len=auto``): the
    values chosen for ``lists`` on ``device`` (its batching may differ: CROSS-JEM's padding
    tolerance). Creating a ranker loads no weights."""
    from bench.execution.ranker_settings import ranker_options
    from rankers import get_ranker_class

    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(rankers):
        cls = get_ranker_class(name)
        config = cls.Config.from_options(ranker_options(name, dataset, options.get(name)))
        ranker = cls(config, device=device)
        chosen = latency_parts(ranker).chosen_options(lists)
        if chosen:
            out[name] = chosen
    return out


def checkpoint_for(ranker: str, checkpoints: Mapping[str, str]) -> str | None:
    """The ranker's own checkpoint, else that of the ranker whose weights it declares it can
    borrow (``borrows_checkpoint_of``: the sentence-transformers peer takes monoBERT's encoder)."""
    from rankers import get_ranker_class

    checkpoints = canonical_keys(checkpoints)
    own = checkpoints.get(ranker)
    if own:
        return own
    source = get_ranker_class(ranker).borrows_checkpoint_of
    return checkpoints.get(source) if source else None


def create_entry(entry: Entry, device: str, checkpoint: str | None = None) -> Ranker:
    """The ranker of ``entry``; ``checkpoint`` (a ``save()`` folder) loads trained weights,
    through the config's ``checkpoint`` option where it has one, else :meth:`Ranker.load`."""
    from rankers import create_ranker, get_ranker_class

    options = dict(entry.options)
    takes_checkpoint = "checkpoint" in config_fields(get_ranker_class(entry.ranker).Config)
    if checkpoint and takes_checkpoint:
        options["checkpoint"] = checkpoint
    ranker = create_ranker(entry.ranker, options, device=device)
    if checkpoint and not takes_checkpoint:
        ranker.load(Path(checkpoint))
    return ranker


def column_for(ranker: str, config: Mapping[str, Any]) -> str:
    """The latency-table column a ranker configured with ``config`` is timed in: that of its
    first latency variant whose options ``config`` agrees with (e.g. a DPR run with
    ``precompute=true`` -> ``dpr (precomputed)``); the ranker's name when none does or the
    config no longer fits the ranker."""
    from rankers import get_ranker_class

    try:
        cls = get_ranker_class(ranker)
        probe = cls(cls.Config.from_options(dict(config)), device="cpu")
    except (RankerError, TypeError, ValueError) as exc:
        log.debug("column of %s: %s", ranker, exc)
        return ranker
    resolved = probe.config.to_dict()
    for variant in latency_parts(probe).latency_variants(None):
        if all(resolved.get(k) == v for k, v in variant.options.items()):
            return variant.column
    return ranker


#: a created and indexed entry: the entry, the checkpoint it loaded (None: none) and its ranker
Loaded = tuple[Entry, str | None, Ranker]


def load_entry(entry: Entry, split: RankingSplit, opts: BenchOptions, device: str) -> Loaded:
    """Create ``entry``'s ranker (with its checkpoint, if any) and index it on ``split``."""
    checkpoint = checkpoint_for(entry.ranker, opts.checkpoints)
    ranker = create_entry(entry, device, checkpoint)
    ranker.index(split)
    return entry, checkpoint, ranker
