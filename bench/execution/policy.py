"""The paper's policy in one place: which rankers are compared with which, and the defaults a
command starts from when the user gives none.

These are choices about the study, not facts about a ranker or a data set; keeping them here
makes them one edit (and one review) instead of a constant in each of five modules.
"""

from __future__ import annotations

import os

#: rankers that need no training here: a fine-tuned ranker whose kept epoch scores below one of
#: them on dev is worse than not training, which a user must hear (small train sets do that)
DEV_BASELINES: tuple[str, ...] = ("bm25", "dpr")
#: environment variable that names the dev baselines instead (comma-separated ranker names;
#: empty: none), e.g. ``bm25`` where scoring zero-shot DPR on every training's dev split costs
#: more than the comparison is worth (a tiny model trained to test where work runs)
DEV_BASELINES_ENV = "BENCH_DEV_BASELINES"
#: a kept epoch above a baseline on dev counts as above it only when the paired t-test over the
#: dev queries gives p below this; otherwise the lead may be dev noise and the log says so
DEV_BASELINE_ALPHA = 0.05

#: the row the comparison tables measure differences and significance against
DEFAULT_BASELINE = "bm25"

#: rankers timed by default, in the paper's table order (st-crossencoder: monoBERT's peer)
DEFAULT_RANKERS: tuple[str, ...] = ("bm25", "dpr", "monobert", "st-crossencoder", "crossjem")

#: ``"all"``: every pair of a call in one forward pass
ALL = "all"
BatchSize = int | str
#: batch sizes timed when none are given: monoBERT's best is reported, not a strawman's
DEFAULT_BATCH_SIZES: dict[str, tuple[BatchSize, ...]] = {
    "monobert": (32, 64, 128, ALL),
    "st-crossencoder": (32, 64, 128),
}

#: the speed-ups a latency block reports: key (``""``: top level) -> (slow column, fast column).
#: The top level is the paper's comparison; ``end_to_end`` the same with tokenisation of items
#: timed.
SPEEDUP_PAIRS: dict[str, tuple[str, str]] = {
    "": ("monobert", "crossjem"),
    "end_to_end": ("monobert (end-to-end)", "crossjem (end-to-end)"),
}


def dev_baselines() -> tuple[str, ...]:
    """The rankers a training compares its kept epoch with on dev: :data:`DEV_BASELINES`, or
    those ``$BENCH_DEV_BASELINES`` names (read per command, so a launch's ranks and the processes
    a command starts agree). A name no ranker has is an error naming the variable and value."""
    given = os.environ.get(DEV_BASELINES_ENV)
    if given is None:
        return DEV_BASELINES
    from rankers import RankerError, canonical_name

    names = [name.strip() for name in given.split(",") if name.strip()]
    try:
        return tuple(dict.fromkeys(canonical_name(name) for name in names))
    except RankerError as exc:
        raise ValueError(f"${DEV_BASELINES_ENV}={given!r}: {exc}") from None
