"""Where things live: project root, data root, results root."""

from __future__ import annotations

import os
from pathlib import Path

#: The checkout this package was installed from (editable install) - holds datasets/ and results/.
PROJECT_ROOT = Path(__file__).resolve().parents[2]

DATA_ENV = "BENCH_DATA_DIR"
RESULTS_ENV = "BENCH_RESULTS_DIR"


def data_root(data_dir: str | Path | None = None) -> Path:
    """``--data-dir``, else ``$BENCH_DATA_DIR``, else the project's ``datasets/`` folder."""
    if data_dir:
        return Path(data_dir).expanduser().resolve()
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser().resolve()
    return PROJECT_ROOT / "datasets"


def cards_dir() -> Path:
    """Dataset cards (tracked in the repo): layout, relevance level, defaults per dataset."""
    return PROJECT_ROOT / "datasets" / "cards"


def results_root(results_dir: str | Path | None = None) -> Path:
    """``--results-dir``, else ``$BENCH_RESULTS_DIR``, else the project's ``results/`` folder."""
    if results_dir:
        return Path(results_dir).expanduser().resolve()
    if os.environ.get(RESULTS_ENV):
        return Path(os.environ[RESULTS_ENV]).expanduser().resolve()
    return PROJECT_ROOT / "results"


def expected_dir() -> Path:
    return PROJECT_ROOT / "results" / "expected"
