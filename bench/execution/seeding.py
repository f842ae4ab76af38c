"""Which seed a trained result is of: a ranker's training seed, and a run as one seed's member.

A trained ranker draws its new weights and its training order from its option ``seed`` (the
training loop seeds from it), not from ``--seed``, which seeds python, numpy and torch for the
rest of a run: ``--seed 1`` alone trains the weights of seed 0 under another key. A seed group's
member for seed ``k`` is therefore the run with ``--set seed=k`` (:func:`reseed`): seed 0 is the
default, so its member is exactly the plain run (the same keys, its cache entry reused). A run that
trains nothing (BM25, a model used as it comes) is the same for every seed and stays as it is;
a distilled student's teachers keep their settings file's seed (``--set`` reaches the student
only), so its members differ in the student's training alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench.execution.ranker_settings import ranker_options
from rankers import canonical_name, create_ranker, get_ranker_class
from rankers.hooks import fits

if TYPE_CHECKING:
    from bench.execution.runner import RunOptions

#: the ranker option that seeds a training's new weights and order (``TrainingConfig.seed``)
TRAINING_SEED = "seed"


def has_training_seed(ranker: str) -> bool:
    """Whether ranker ``ranker`` declares the training seed option."""
    fields = dataclasses.fields(get_ranker_class(canonical_name(ranker)).Config)
    return any(f.name == TRAINING_SEED for f in fields)


def trains(opts: RunOptions) -> bool:
    """Whether the run of ``opts`` trains its ranker (``--fit``, or an untrained head that a run
    trains first) and the ranker has a training seed: only then does a seed change its result."""
    name = canonical_name(opts.ranker)
    if not has_training_seed(name):
        return False
    if opts.fit:
        return True
    ranker = create_ranker(name, ranker_options(name, opts.dataset, opts.options), device="cpu")
    return fits(ranker).untrained_weights() is not None


def reseed(opts: RunOptions, seed: int) -> RunOptions:
    """The run of ``opts`` as seed ``seed``'s member: its ranker's training seed set (what
    ``--set seed=SEED`` sets) when the run trains it; a run that trains nothing as it is."""
    if not trains(opts):
        return opts
    return dataclasses.replace(opts, options={**opts.options, TRAINING_SEED: seed})


def check_seeds(runs: Sequence[RunOptions], seeds: Sequence[int]) -> None:
    """Refuse ``--seeds`` where it would run the same thing per seed: a training seed given
    with ``--set seed=``, or no run that trains (every seed would give the same results)."""
    for opts in runs:
        if TRAINING_SEED in opts.options:
            raise ValueError(
                f"--set seed={opts.options[TRAINING_SEED]} and --seeds "
                f"{','.join(map(str, seeds))}: --seeds sets the training seed; give one of them"
            )
    if not any(trains(opts) for opts in runs):
        names = ", ".join(sorted({canonical_name(o.ranker) for o in runs}))
        raise ValueError(
            f"--seeds: {names} is not trained by this command (or has no training seed), so "
            "every seed would give the same result; --seeds is for rankers trained here"
        )
