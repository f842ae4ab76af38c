"""The teacher table of docs/results.md: one CROSS-JEM row layout (hybrid ``share_min=4`` with row
positions, the closest to the order-at-speed aim) distilled from each teacher tried, with its dev
and test AP@10, its distance to the aim and its measured speed-up.

The layout is the same in every row, so the speed-up is that of the layout's one `bench latency`
run beside monoBERT (the crossjem-order-wikiqa table's record). Each row's record must name the
teacher the row says: the record's ``training.teacher`` is compared with the row's members (the
weights hash of each member's ``ranker.json``), so a row cannot show another teacher's run.

The same table over seeds (``crossjem-teachers-wikiqa-seeds``) shows a row's seed group where its
student was trained again under seeds 0, 1 and 2, against monoBERT over the same seeds, and
marks the row a choice by mean dev AP@10 makes: a difference of a point decides these rows, and
one seed does not say whether a reseed keeps it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from bench.core.trained import TrainingSummary
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
from bench.reporting.figures_seeds import kept_dev_scores, mean_sd_cell, spread_cell
from bench.reporting.picks import MONOBERT_CE, WIKIQA
from bench.results.groups import GroupRecord
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
    #: the student's seed group (seeds 0, 1, 2) and its teachers' weights hashes; None: the
    #: student has one seed
    group: str | None = None
    group_members: tuple[str, ...] = ()


#: weights hashes of the teachers (``ranker.json`` of each folder): the ce monoBERT and ColBERT the
#: layouts were distilled from, the same trainings run again later (their weights differ in the
#: last bits; the same test AP@10), and CROSS-JEM concat with row positions
MONOBERT = "e795b4c78e3ba90e"
COLBERT = "001c126b89415f1b"
MONOBERT_AGAIN = "ed90f958919abeae"
COLBERT_AGAIN = "ba84634d0217a7ea"
CONCAT = "ebbfbcc3e7111c69"
#: the seed-0 monoBERT and ColBERT, and CROSS-JEM concat, trained again from a frozen commit: the
#: fixed teachers of the reseeded students (whose seed 0 gives the one-seed row's test AP@10 bit
#: for bit)
MONOBERT_SEEDS = "ec554cea6033f828"
COLBERT_SEEDS = "c6e602d12608ff0b"
CONCAT_SEEDS = "1042362c13872fbf"

TEACHERS: tuple[TeacherRow, ...] = (
    TeacherRow(
        "monoBERT + ColBERT (the layouts' teachers)",
        "word-order/wikiqa-hybrid4-row.json",
        (MONOBERT, COLBERT),
        "seeds/test-seeds-2a80ffbb8d58.json",
        (MONOBERT_SEEDS, COLBERT_SEEDS),
    ),
    TeacherRow(
        "CROSS-JEM concat, row positions (best joint model on dev)",
        "word-order/teachers/wikiqa-hybrid4-row-concat.json",
        (CONCAT,),
        "seeds/test-seeds-d0363ea058e0.json",
        (CONCAT_SEEDS,),
    ),
    TeacherRow(
        "monoBERT + CROSS-JEM concat",
        "word-order/teachers/wikiqa-hybrid4-row-monobert-concat.json",
        (MONOBERT_AGAIN, CONCAT),
        "seeds/test-seeds-986ecacc5420.json",
        (MONOBERT_SEEDS, CONCAT_SEEDS),
    ),
    TeacherRow(
        "monoBERT x 2 + ColBERT (weighted towards monoBERT)",
        "word-order/teachers/wikiqa-hybrid4-row-2monobert-colbert.json",
        (MONOBERT_AGAIN, MONOBERT_AGAIN, COLBERT_AGAIN),
        "seeds/test-seeds-acd826881eba.json",
        (MONOBERT_SEEDS, MONOBERT_SEEDS, COLBERT_SEEDS),
    ),
)
#: monoBERT's own run (the ce model scored from its folder, with its per-query file): the
#: baseline of the paired tests
MONOBERT_RUN = "set-encoder/wikiqa-monobert-run.json"
#: monoBERT's seed group (seeds 0, 1, 2; seed 0 is the teacher of the reseeded students)
MONOBERT_GROUP = "seeds/test-seeds-bdd9104290f2.json"


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


def layout_speedup(records: Records) -> float:
    """The layout's measured speed-up over monoBERT at N = :data:`AIM_N` (its one run)."""
    bench = records.latency(LAYOUT_LATENCY)
    speed = bench.block(AIM_N).speedup
    if speed.get("model") != best_row(bench, AIM_N, LAYOUT_COLUMN).label:
        raise ReferenceError(f"{bench.path}: N={AIM_N} speed-up is not of {LAYOUT_COLUMN!r}")
    return float(speed["measured_mean"])


def checked_run(records: Records, row: TeacherRow) -> ResultRecord:
    """The row's run record, refused unless it was distilled from the row's teacher."""
    record = records.run(row.record)
    if members(record) != row.members:
        raise ReferenceError(
            f"{row.record}: its teacher members are {members(record)}, not {row.members} "
            f"as the row {row.shown!r} says"
        )
    return record


def checked_group(records: Records, row: TeacherRow, seeds: list[int]) -> GroupRecord:
    """The row's seed group, refused unless every member was distilled from the row's
    reseeding teachers and the group has monoBERT's ``seeds``."""
    assert row.group is not None
    group = records.group(row.group)
    for seed, member in zip(group.seeds, group.members, strict=True):
        if members(member) != row.group_members:
            raise ReferenceError(
                f"{row.group}: seed {seed}'s teacher members are {members(member)}, not "
                f"{row.group_members} as the row {row.shown!r} says"
            )
    if group.seeds != seeds:
        raise ReferenceError(f"{row.group}: seeds {group.seeds}, monoBERT's are {seeds}")
    return group


def aim_cell(test: float, mono: float, speedup: float) -> str:
    """The aim's cell: met, or how many points the row is short of it (negative) or above."""
    short = 100 * (test - mono) + AIM_POINTS
    return "met" if short >= 0 and speedup >= AIM_SPEEDUP else f"{short:+.2f}"


@renderer("crossjem-teachers-wikiqa")
def crossjem_teachers_wikiqa(records: Records) -> str:
    """Hybrid share_min=4 with row positions on wikiqa, one row per teacher: the targets, dev
    AP@10 of the kept epoch, test AP@10, the difference to monoBERT with the paired t-test
    (Holm over the rows; missing where a run's per-query file is not kept), the difference to the
    aim, and the layout's measured speed-up at N=100."""
    mono = records.row(WIKIQA, MONOBERT_CE).metrics["AP@10"]
    speedup = layout_speedup(records)
    tests = paired_tests(
        [(records.per_query(MONOBERT_RUN), records.per_query(r.record), "AP@10") for r in TEACHERS]
    )
    rows = []
    for row, test_p in zip(TEACHERS, tests, strict=True):
        record = checked_run(records, row)
        test = float(record.metrics["AP@10"])
        rows.append(
            [
                row.shown,
                targets(record),
                kept_dev(record),
                fixed(test),
                f"{100 * (test - mono):+.2f}",
                p_value(test_p.p_holm, test_p.significant) if test_p else MISSING,
                aim_cell(test, mono, speedup),
                times(speedup),
            ]
        )
    header = ["teacher", "targets", "dev AP@10 (epoch)", "test AP@10", "vs monoBERT (points)"]
    header += ["p vs monoBERT (Holm)", "to the aim (points)", f"speed-up N={AIM_N}"]
    return markdown(header, rows)


@dataclass(frozen=True)
class _SeededRow:
    """A teacher row over its seeds: the cells, the test and monoBERT means it is judged on,
    the kept dev scores a choice by mean dev reads, and the paired test's two sides."""

    seeds: list[int]
    dev: list[float] | None
    dev_cell: str
    test: float
    test_cell: str
    mono: float
    mono_cell: str
    pair: tuple[Any, Any, str]


def _seeded_row(records: Records, row: TeacherRow, mono_group: GroupRecord) -> _SeededRow:
    if row.group is not None:
        group = checked_group(records, row, mono_group.seeds)
        dev = kept_dev_scores(group)
        return _SeededRow(
            group.seeds,
            dev,
            mean_sd_cell(dev),
            group.metrics["AP@10"],
            spread_cell(group, "AP@10"),
            mono_group.metrics["AP@10"],
            spread_cell(mono_group, "AP@10"),
            (mono_group.per_query() or None, group.per_query() or None, "AP@10"),
        )
    record = checked_run(records, row)
    kept = TrainingSummary.from_json(record.training or {}).kept_dev_score()
    mono = records.row(WIKIQA, MONOBERT_CE).metrics["AP@10"]
    test = float(record.metrics["AP@10"])
    return _SeededRow(
        [int((record.config or {}).get("seed", 0))],
        None if kept is None else [float(kept)],
        fixed(kept),
        test,
        fixed(test),
        mono,
        fixed(mono),
        (records.per_query(MONOBERT_RUN), records.per_query(row.record), "AP@10"),
    )


@renderer("crossjem-teachers-wikiqa-seeds")
def crossjem_teachers_wikiqa_seeds(records: Records) -> str:
    """The teacher table over seeds: a row's seed group where its student was trained again
    (its teachers fixed), else its one run; test AP@10 against monoBERT over the same seeds
    (the paired t-test on per-query means over the seeds, Holm over the rows); the aim judged
    on the means; and the row with the highest mean kept dev AP@10 marked as the dev choice."""
    speedup = layout_speedup(records)
    mono_group = records.group(MONOBERT_GROUP)
    seeded = [_seeded_row(records, row, mono_group) for row in TEACHERS]
    tests = paired_tests([s.pair for s in seeded])
    means = [statistics.fmean(s.dev) if s.dev else float("-inf") for s in seeded]
    chosen = means.index(max(means))
    rows = []
    for i, (row, s, test_p) in enumerate(zip(TEACHERS, seeded, tests, strict=True)):
        rows.append(
            [
                row.shown,
                f"{len(s.seeds)} ({', '.join(map(str, s.seeds))})",
                s.dev_cell,
                s.test_cell,
                s.mono_cell,
                f"{100 * (s.test - s.mono):+.2f}",
                p_value(test_p.p_holm, test_p.significant) if test_p else MISSING,
                aim_cell(s.test, s.mono, speedup),
                "chosen" if i == chosen else "",
            ]
        )
    header = ["teacher", "seeds", "dev AP@10 (kept)", "test AP@10", "monoBERT, same seeds"]
    header += ["vs monoBERT (points)", "p vs monoBERT (Holm)", "to the aim (points)"]
    header += ["on mean dev"]
    return markdown(header, rows)
