"""Ablations of CROSS-JEM as in the paper's ablation table: the training loss, item positions.

Every variant runs through :func:`bench.runner.run` on the same data, seed and teacher, so the
rows differ in exactly one setting; the table is the comparison table with variant labels and
significance against the first variant.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from bench.context import RunContext
from bench.results import ResultRecord
from bench.runner import RunOptions, run

log = logging.getLogger(__name__)

#: what -> (option name, values in table order; the first is the significance baseline)
ABLATIONS: dict[str, tuple[str, tuple[Any, ...]]] = {
    "loss": ("loss", ("bce", "ce", "listnet", "rpl", "rpl-self", "pl")),
    "positions": ("item_positions", (False, True)),
}


def run_ablation(what: str, base: RunOptions, ctx: RunContext | None = None) -> list[ResultRecord]:
    """Run every variant of ``what`` (cached variants are reused), all in ``ctx`` (default:
    ``base``'s context); records carry variant labels."""
    if what not in ABLATIONS:
        raise ValueError(f"--what must be one of {', '.join(ABLATIONS)}, not {what!r}")
    option, values = ABLATIONS[what]
    ctx = ctx or base.context()
    records = []
    for value in values:
        opts = dataclasses.replace(base, options={**base.options, option: value})
        log.info("ablation %s: %s=%s", what, option, value)
        rec = run(opts, ctx)
        records.append(dataclasses.replace(rec, label=f"{base.ranker} {option}={value}"))
    return records
