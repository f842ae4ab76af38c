"""The package metadata setuptools builds from pyproject.toml (what `pip install -e .` runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

PROJECT = Path(__file__).resolve().parent.parent


@pytest.mark.processes
def test_license_is_an_spdx_expression_and_builds_without_deprecations(tmp_path: Path) -> None:
    """A ``license`` table is deprecated by setuptools (builds stop working in 2027); the SPDX
    string needs setuptools >= 77, which the build requirements must then say."""
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"
    assert project["build-system"]["requires"] == ["setuptools>=77"]
    # the metadata step of a PEP 517 build, any setuptools warning an error
    script = (
        "import warnings, sys\n"
        "from setuptools import build_meta\n"
        "from setuptools.warnings import SetuptoolsWarning\n"
        "warnings.simplefilter('error', SetuptoolsWarning)\n"
        "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    metadata = (tmp_path / done.stdout.strip().splitlines()[-1] / "METADATA").read_text()
    assert "License-Expression: MIT" in metadata.splitlines()


def test_the_version_is_stated_alike() -> None:
    """The package metadata (pyproject.toml) and ``bench.__version__`` (which records carry)
    name the same release."""
    import bench

    project = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == bench.__version__ == "0.3.0"
