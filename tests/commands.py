"""`bench` commands run as real processes, for the tests that need one (spawned ranks, launchers,
signals, two commands at once).

One environment and one way to start them, so that every such test reads the data folder and
writes the results folder it names (never the checkout's), offline, and fails with the command's
own error output rather than a bare exit code. Tests that start processes carry the
``processes`` marker (tests/conftest.py checks it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: the checkout: commands run from here, as `make test` runs them
PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: this interpreter's ``python -m bench.cli``, the command line of a one-process command
BENCH = (sys.executable, "-m", "bench.cli")


def bench_env(data: Path, results: Path, **extra: str) -> dict[str, str]:
    """This process's environment with ``data`` as the data root and ``results`` as the results
    root, the hub offline and the tokenizers' own threads off (a forked rank would warn), then
    ``extra``."""
    return {
        **os.environ,
        "BENCH_DATA_DIR": str(data),
        "BENCH_RESULTS_DIR": str(results),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        **extra,
    }


def run_command(
    results: Path,
    data: Path,
    command: Sequence[str],
    env: dict[str, str] | None = None,
    timeout: int = 300,
) -> subprocess.CompletedProcess[str]:
    """``command`` (a bench command line, launched or not) from the checkout on ``data``,
    writing to ``results`` (:func:`bench_env`, then ``env``); its output captured as text."""
    return subprocess.run(
        list(command),
        cwd=PROJECT_ROOT,
        env=bench_env(data, results, **(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def at_once(
    *commands: Callable[[], subprocess.CompletedProcess[str]],
) -> list[subprocess.CompletedProcess[str]]:
    """The results of ``commands`` (each a call of :func:`run_command` or a wrapper of it) run
    at the same time, in the order given. For the independent commands a test compares (a
    one-process and a two-process run, each in its own results folder): a one-process command
    keeps one core busy, so on two cores both end in about the time of the longer one."""
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(lambda command: command(), commands))


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """``result`` once it has exited 0; else the test fails with the end of its stderr."""
    assert result.returncode == 0, result.stderr[-2000:]
    return result
