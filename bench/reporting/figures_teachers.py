"""The teacher table of docs/results.md: one CROSS-JEM row layout (hybrid ``share_min=4`` with row
positions, the closest to the order-at-speed aim) distilled from each teacher tried, with its dev
and test AP@10, its distance to the aim and its measured speed-up.

The layout is the same in every row, so the speed-up is that of the layout's one `bench latency`
run beside monoBERT (the crossjem-order-wikiqa table's record). Each row's record must name the
teacher the row says: the record's ``training.teacher`` is compared with the row's members (the
weights hash of each member's ``ranker.json``), so a row cannot show another teacher's run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.core.writer import markdown
from bench.reporting.figures import (
    MISSING,
    Records,
    ReferenceError,
    best_row,
    fixed,
    kept_dev,
    p_value,
    paired_tests,
    renderer,
    times,
)
from bench.reporting.picks import MONOBERT_CE, WIKIQA
from bench.results.records import ResultRecord

#: the aim: test AP@10 within this many points of monoBERT's, at a measured speed-up of at least
#: :data:`AIM_SPEEDUP` at N = :data:`AIM_N`
AIM_POINTS = 1.0
AIM_SPEEDUP = 2.0
AIM_N = 100
#: the layout's `bench latency` run beside monoBERT and its column there
LAYOUT_LATENCY = "latency/word-order-hybrid4-row.json"
LAYOUT_COLUMN = "crossjem {hybrid share_min=4}"


@dataclass(frozen=True)
class TeacherRow:
    """A teacher tried for the layout: what the table shows, the run record, and the members'
    weights hashes in the order the ``teacher`` option named them (a member named twice
    counts twice in the ensemble's mean)."""

    shown: str
    record: str
    members: tuple[str, ...]


#: weights hashes of the teachers (``ranker.json`` of each folder): the ce monoBERT and ColBERT the
#: layouts were distilled from, the same trainings run again later (their weights differ in the
#: last bits; the same test AP@10), and CROSS-JEM concat with row positions
MONOBERT = "e795b4c78e3ba90e"
COLBERT = "001c126b89415f1b"
MONOBERT_AGAIN = "ed90f958919abeae"
COLBERT_AGAIN = "ba84634d0217a7ea"
CONCAT = "ebbfbcc3e7111c69"

TEACHERS: tuple[TeacherRow, ...] = (
    TeacherRow(
        "monoBERT + ColBERT (the layouts' teachers)",
        "word-order/wikiqa-hybrid4-row.json",
        (MONOBERT, COLBERT),
    ),
    TeacherRow(
        "CROSS-JEM concat, row positions (best joint model on dev)",
        "word-order/teachers/wikiqa-hybrid4-row-concat.json",
        (CONCAT,),
    ),
    TeacherRow(
        "monoBERT + CROSS-JEM concat",
        "word-order/teachers/wikiqa-hybrid4-row-monobert-concat.json",
        (MONOBERT_AGAIN, CONCAT),
    ),
    TeacherRow(
        "monoBERT x 2 + ColBERT (weighted towards monoBERT)",
        "word-order/teachers/wikiqa-hybrid4-row-2monobert-colbert.json",
        (MONOBERT_AGAIN, MONOBERT_AGAIN, COLBERT_AGAIN),
    ),
)
#: monoBERT's own run (the ce model scored from its folder, with its per-query file): the
#: baseline of the paired tests
MONOBERT_RUN = "set-encoder/wikiqa-monobert-run.json"


def members(record: ResultRecord) -> tuple[str, ...]:
    """The weights hashes of a run's teacher members, in the order they were named."""
    info: dict[str, Any] = (record.training or {}).get("teacher") or {}
    parts = info.get("members") or ([info] if info else [])
    return tuple(str(p.get("weights_hash", "")) for p in parts)


def targets(record: ResultRecord) -> str:
    """How the teacher's logits became targets: one member's logits, or the mean of the
    members' per-list z-scores, through a sigmoid or as they are."""
    info: dict[str, Any] = (record.training or {}).get("teacher") or {}
    mode = str(info.get("scores", "sigmoid"))
    n = len(info.get("members") or [info])
    source = "logits" if n == 1 else f"mean of {n} z-scores"
    return f"sigmoid({source})" if mode == "sigmoid" else source


@renderer("crossjem-teachers-wikiqa")
def crossjem_teachers_wikiqa(records: Records) -> str:
    """Hybrid share_min=4 with row positions on wikiqa, one row per teacher: the targets, dev
    AP@10 of the kept epoch, test AP@10, the difference to monoBERT with the paired t-test
    (Holm over the rows; missing where a run's per-query file is not kept), the difference to the
    aim, and the layout's measured speed-up at N=100."""
    mono = records.row(WIKIQA, MONOBERT_CE).metrics["AP@10"]
    bench = records.latency(LAYOUT_LATENCY)
    speed = bench.block(AIM_N).speedup
    if speed.get("model") != best_row(bench, AIM_N, LAYOUT_COLUMN).label:
        raise ReferenceError(f"{bench.path}: N={AIM_N} speed-up is not of {LAYOUT_COLUMN!r}")
    speedup = float(speed["measured_mean"])
    tests = paired_tests(
        [(records.per_query(MONOBERT_RUN), records.per_query(r.record), "AP@10") for r in TEACHERS]
    )
    rows = []
    for row, test_p in zip(TEACHERS, tests, strict=True):
        record = records.run(row.record)
        if members(record) != row.members:
            raise ReferenceError(
                f"{row.record}: its teacher members are {members(record)}, not {row.members} "
                f"as the row {row.shown!r} says"
            )
        test = float(record.metrics["AP@10"])
        short = 100 * (test - mono) + AIM_POINTS
        met = short >= 0 and speedup >= AIM_SPEEDUP
        rows.append(
            [
                row.shown,
                targets(record),
                kept_dev(record),
                fixed(test),
                f"{100 * (test - mono):+.2f}",
                p_value(test_p.p_holm, test_p.significant) if test_p else MISSING,
                "met" if met else f"{short:+.2f}",
                times(speedup),
            ]
        )
    header = ["teacher", "targets", "dev AP@10 (epoch)", "test AP@10", "vs monoBERT (points)"]
    header += ["p vs monoBERT (Holm)", "to the aim (points)", f"speed-up N={AIM_N}"]
    return markdown(header, rows)
