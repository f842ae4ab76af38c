"""A ranker's settings: its settings file, and the options a run of it on a dataset resolves.

Every command that creates a ranker (a run, a training, a sweep, `bench latency`, the dataset
listing's row counts) resolves its options the same way, here: the settings file's ``default``
section, then its ``datasets.<name>`` section, then the command line. Apart from the runner so
that the latency layer, the sweep and the reports resolve options without importing the plan
of a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from bench.data.files import read_text
from rankers import RankerError, config_file, get_ranker_class

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


def settings_config(name: str, dataset: str) -> dict[str, Any]:
    """The full config a plain ``bench run -r NAME -d DATASET`` uses: the settings file's
    ``default`` and ``datasets.DATASET`` sections over the class defaults. Labels and
    ``overrides`` name what a run changes from it."""
    return get_ranker_class(name).Config.from_options(ranker_options(name, dataset)).to_dict()
