"""A ranker's settings: its settings file, and the options a run of it on a dataset resolves.

Every command that creates a ranker (a run, a training, a sweep, `bench latency`, the dataset
listing's row counts) resolves its options the same way, here: the settings file's ``default``
section, then its ``datasets.<name>`` section, then the command line. Apart from the runner so
that the latency layer, the sweep and the reports resolve options without importing the plan
of a run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from bench.data.files import read_text
from rankers import Ranker, RankerError, config_file, get_ranker_class

#: the settings files of the rankers registered in this repository
CONFIG_DIR = Path(__file__).resolve().parents[2] / "rankers" / "configs"


def settings_file(name: str) -> Path:
    """The settings file of ranker ``name`` (it need not exist): the one the ranker was
    registered with, else ``CONFIG_DIR/<name>.yaml``."""
    return config_file(name) or CONFIG_DIR / f"{name}.yaml"


def ranker_options(
    name: str, dataset: str, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Settings for ``name`` on ``dataset``: config file ``default``, then its ``datasets.<name>``
    section, then ``overrides`` (the command line). Rankers without a file use their defaults.
    The file is ``CONFIG_DIR/<name>.yaml``, or the one the ranker was registered with
    (:func:`rankers.register`), so that a ranker kept outside this repository brings its own."""
    path = settings_file(name)
    options: dict[str, Any] = {}
    if path.exists():
        try:
            data = yaml.safe_load(read_text(path)) or {}
        except yaml.YAMLError as exc:
            raise RankerError(f"{path}: not valid YAML ({exc})") from exc
        unknown = set(data) - {"default", "datasets"}
        if unknown or not isinstance(data.get("default", {}), dict):
            raise RankerError(f"{path}: expected keys 'default' and 'datasets' (mappings)")
        options.update(data.get("default") or {})
        options.update((data.get("datasets") or {}).get(dataset) or {})
    options.update(overrides or {})
    return options


#: the option of a trainable ranker that seeds its new weights and its training order (the
#: training loop seeds from it, not from the process's seed)
TRAINING_SEED = "seed"


def seeded_ranker_options(
    name: str, dataset: str, overrides: Mapping[str, Any] | None, seed: int
) -> dict[str, Any]:
    """:func:`ranker_options` of a ranker trained by a run with ``--seed seed``: a ranker with a
    training seed option (:data:`TRAINING_SEED`) trains with the run's seed, so another seed is
    another training (new weights drawn, another order), unless the command line sets the
    option itself (``overrides``). Seed 0 leaves the options as they are, so a default run's
    settings, keys and label are unchanged."""
    options = ranker_options(name, dataset, overrides)
    if not seed or TRAINING_SEED in (overrides or {}):
        return options
    fields = dataclasses.fields(get_ranker_class(name).Config)
    if any(f.name == TRAINING_SEED for f in fields):
        options[TRAINING_SEED] = seed
    return options


def training_seeded(ranker: Ranker, seed: int, overrides: Mapping[str, Any]) -> Ranker:
    """``ranker``, about to be trained by a run with ``--seed seed``, with that seed as its
    training seed (the rule of :func:`seeded_ranker_options`; a new instance when it changes)."""
    if not seed or TRAINING_SEED in overrides or not hasattr(ranker.config, TRAINING_SEED):
        return ranker
    config = dataclasses.replace(ranker.config, **{TRAINING_SEED: seed})
    return type(ranker)(config, device=ranker.device)


def settings_config(name: str, dataset: str) -> dict[str, Any]:
    """The full config a plain ``bench run -r NAME -d DATASET`` uses: the settings file's
    ``default`` and ``datasets.DATASET`` sections over the class defaults. Labels and
    ``overrides`` name what a run changes from it."""
    return get_ranker_class(name).Config.from_options(ranker_options(name, dataset)).to_dict()
