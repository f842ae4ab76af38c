"""Seed-group tables of docs/results.md: each row one configuration trained under several seeds,
kept as a seed group with its members under ``results/reference`` (:meth:`Records.group`).

A row shows the dev AP@10 each seed's training kept (mean ± sd: what a choice by mean dev
reads), test AP@10 and RR@10 as mean ± sample standard deviation (n - 1) over its seeds,
the difference of its mean AP@10 to the first row's with the paired t-test on the per-query
means over the seeds (Holm over the rows), and ``≈`` where that difference is smaller than the
seed spread (the larger sample standard deviation of the two rows): a reseed can reverse it.
"""

from __future__ import annotations

from bench.core.trained import TrainingSummary
from bench.core.writer import markdown
from bench.reporting.figures import MISSING, Records, p_value, paired_tests, renderer
from bench.results.groups import GroupRecord, spread
from bench.results.records import supervision

#: the measures each row shows, the first the one the differences and tests are of
MEASURES = ("AP@10", "RR@10")
#: marks a difference to the first row smaller than the seed spread (as ``bench compare``'s)
WITHIN_SPREAD = "≈"


def spread_cell(group: GroupRecord, metric: str) -> str:
    """``0.7721 ± 0.0032``: the mean and sample standard deviation over the group's seeds."""
    return f"{group.metrics[metric]:.4f} ± {group.sd[metric]:.4f}"


def kept_dev_scores(group: GroupRecord) -> list[float] | None:
    """The dev AP@10 of each member's kept epoch (what a choice by mean dev reads); None when a
    member's training kept none (a run that was not trained, or trained without a dev split)."""
    kept = [TrainingSummary.from_json(m.training or {}).kept_dev_score() for m in group.members]
    if not kept or any(k is None for k in kept):
        return None
    return [float(k) for k in kept if k is not None]


def mean_sd_cell(values: list[float] | None) -> str:
    """``0.7721 ± 0.0032``: mean and sample standard deviation of ``values``; missing for None."""
    if values is None:
        return MISSING
    mean, sd = spread(values)
    return f"{mean:.4f} ± {sd:.4f}"


def kept_dev_cell(group: GroupRecord) -> str:
    """:func:`kept_dev_scores` as mean ± sd; missing without them."""
    return mean_sd_cell(kept_dev_scores(group))


@renderer("seed-groups")
def seed_groups(records: Records) -> str:
    """One row per seed group the marker names, the first the baseline of the differences and
    paired t-tests (per-query means over the seeds; missing where a member's per-query file is
    not kept)."""
    groups = [records.group(path.as_posix()) for path in records.paths]
    base, metric = groups[0], MEASURES[0]
    tests = paired_tests(
        [(base.per_query() or None, g.per_query() or None, metric) for g in groups[1:]]
    )
    rows = []
    for i, group in enumerate(groups):
        test = tests[i - 1] if i else None
        delta = group.metrics[metric] - base.metrics[metric]
        within = i and abs(delta) < max(group.sd[metric], base.sd[metric])
        rows.append(
            [
                group.label,
                supervision(group.training),
                f"{len(group.seeds)} ({', '.join(map(str, group.seeds))})",
                kept_dev_cell(group),
                *(spread_cell(group, m) for m in MEASURES),
                f"{100 * delta:+.2f}{WITHIN_SPREAD if within else ''}" if i else MISSING,
                p_value(test.p_holm, test.significant) if test else MISSING,
            ]
        )
    header = ["System", "Supervision", "Seeds", "dev AP@10 (kept)"]
    header += [f"test {m}" for m in MEASURES]
    header += [f"{metric} vs first (points)", "paired t-test p (Holm)"]
    return markdown(header, rows)
