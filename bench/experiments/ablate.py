"""Ablations as in the paper: one option varied, all else equal (``bench ablate --what ...``).

Every variant runs through :func:`bench.execution.runner.run` on the same data, seed and teacher, so
the rows differ in exactly one setting; the table is the comparison table with variant labels and
significance against the first variant. An ablation is one :class:`Ablation` entry in
:data:`ABLATIONS` (the option it varies, its values, the ranker it is made for by default): adding
one, e.g. CROSS-JEM's input layout, is one line here once the ranker declares the option.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI reads ABLATIONS for its help: importing this module stays light
    from bench.execution.context import RunContext
    from bench.execution.runner import RunOptions
    from bench.results.records import ResultRecord

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Ablation:
    """One ablation: the ranker option it varies and the values, in table order (the first is
    the significance baseline); ``ranker``: the ranker used when ``-r`` is not given;
    ``labels``: a row label per value (default ``option=value``). A value may be a mapping of
    several options that make one variant together (``{"order": "concat", "positions":
    "item"}``); ``option`` then names the one every variant sets."""

    option: str
    values: tuple[Any, ...]
    ranker: str = "crossjem"
    help: str = ""
    labels: tuple[str, ...] | None = None

    def describe(self) -> str:
        """``the loss: bce, ce, ...`` for the CLI's help."""
        if all(isinstance(v, Mapping) for v in self.values):
            variants = "; ".join(self.label(i) for i in range(len(self.values)))
            return f"{self.help} ({variants}; -r default {self.ranker})"
        values = ", ".join(str(v).lower() for v in self.values)
        return f"{self.help} ({self.option}={values}; -r default {self.ranker})"

    def options(self, index: int) -> dict[str, Any]:
        """The option overrides of the ``index``-th variant."""
        value = self.values[index]
        return dict(value) if isinstance(value, Mapping) else {self.option: value}

    def label(self, index: int) -> str:
        """The row label of the ``index``-th value."""
        if self.labels is not None:
            return self.labels[index]
        return ", ".join(f"{k}={v}" for k, v in self.options(index).items())


#: what -> ablation (``bench ablate --what WHAT``)
ABLATIONS: dict[str, Ablation] = {
    "loss": Ablation("loss", ("bce", "ce", "listnet", "rpl", "rpl-self", "pl"), help="the loss"),
    "positions": Ablation("item_positions", (False, True), help="CROSS-JEM item positions"),
    "order": Ablation(
        "order",
        (
            {"order": "union"},
            {"order": "concat", "positions": "row"},
            {"order": "concat", "positions": "item"},
            {"order": "hybrid", "positions": "item"},
            {"order": "hybrid", "positions": "row"},
            {"order": "hybrid", "positions": "row", "share_min": 3},
            {"order": "hybrid", "positions": "row", "share_min": 4},
            {"order": "union", "positions": "row", "merge_layers": 1},
            {"order": "hybrid", "positions": "row", "share": "function", "content_share_min": 3},
            {
                "order": "hybrid",
                "positions": "row",
                "share": "function",
                "content_share_min": 4,
                "query_pool": True,
            },
        ),
        help="CROSS-JEM row layout: the paper's sorted union against layouts keeping word order",
    ),
    "item-order": Ablation(
        "sort_item_tokens",
        (False, True),
        ranker="monobert",
        help="items as written vs their words sorted; any ranker with the option",
        labels=("items as written", "item words sorted"),
    ),
}


def ablation(what: str) -> Ablation:
    """The ablation named ``what``; an unknown name lists the known ones."""
    if what not in ABLATIONS:
        raise ValueError(f"--what must be one of {', '.join(ABLATIONS)}, not {what!r}")
    return ABLATIONS[what]


def check_ranker(what: str, ranker: str) -> None:
    """Refuse, before any work, a ranker whose config does not declare the ablated option."""
    from rankers import get_ranker_class

    option = ablation(what).option
    config = get_ranker_class(ranker).Config
    if not any(f.name == option for f in dataclasses.fields(config)):
        raise ValueError(
            f"ranker {ranker!r} has no option {option!r}, so it cannot run the {what} ablation "
            f"(bench rankers lists each ranker's options)"
        )


def ablation_runs(what: str, base: RunOptions) -> list[RunOptions]:
    """The `bench run` options of every variant of ``what`` (what ``bench ablate --plan``
    plans)."""
    spec = ablation(what)
    check_ranker(what, base.ranker)
    varied = {k for i in range(len(spec.values)) for k in spec.options(i)}
    clash = sorted(varied & set(base.options))
    if clash:
        given = ", ".join(f"--set {k}={base.options[k]}" for k in clash)
        raise ValueError(
            f"{given}: the {what} ablation sets {', '.join(clash)} itself in every variant "
            f"({spec.describe()}); drop it, or run one variant with bench run"
        )
    return [
        dataclasses.replace(base, options={**base.options, **spec.options(index)})
        for index in range(len(spec.values))
    ]


def run_ablation(
    what: str,
    base: RunOptions,
    ctx: RunContext | None = None,
    runs: Sequence[RunOptions] | None = None,
) -> list[ResultRecord]:
    """Run every variant of ``what`` with ``base.ranker`` (cached variants are reused), all in
    ``ctx`` (default: ``base``'s context); records carry variant labels. ``runs``: these runs of
    the variants instead (one seed's, :mod:`bench.execution.seeding`)."""
    from bench.execution.runner import check_runs, run

    spec = ablation(what)
    ctx = ctx or base.context()
    records = []
    runs = list(runs) if runs is not None else ablation_runs(what, base)
    check_runs(runs, ctx)
    for index, opts in enumerate(runs):
        log.info("ablation %s: %s", what, spec.label(index))
        rec = run(opts, ctx)
        records.append(dataclasses.replace(rec, label=f"{base.ranker} {spec.label(index)}"))
    return records
