"""Shared test settings: offline hub, the real shared data, small deterministic fixtures, and the
results the process-launching tests share (made once per session by real `bench` processes)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
#: a training compares its kept epoch on dev with BM25 only (bench.execution.policy.dev_baselines):
#: DPR would load MiniLM and score the whole dev split for every tiny training, in this process
#: and in every `bench` process a test starts. tests/test_runner.py checks the comparison itself.
os.environ.setdefault("BENCH_DEV_BASELINES", "bm25")

FIXTURES = Path(__file__).parent / "fixtures"
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _shared_data() -> Path:
    env = os.environ.get("BENCH_DATA_DIR")
    return Path(env).resolve() if env else (PROJECT_ROOT.parent / "shared" / "data").resolve()


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: relative path -> (size, modification time in ns)."""
    if not folder.is_dir():
        return {}
    return {
        p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file() or p.is_symlink()
    }


@pytest.fixture(scope="session", autouse=True)
def _checkout_results_untouched() -> Iterator[None]:
    """The suite writes nothing into the checkout: results follow the root a test gives (its
    ``results_dir``), never the checkout's ``results/`` (whose tracked files are
    ``results/expected`` and ``results/reference``). Any file added, changed or removed there
    during the session fails it, naming the files."""
    folder = PROJECT_ROOT / "results"
    before = _listing(folder)
    yield
    after = _listing(folder)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if changed[10:] else "")
        pytest.fail(f"the tests changed {len(changed)} file(s) under {folder}: {shown}")


#: where this interpreter's console scripts live (bench, torchrun, accelerate)
_SCRIPTS = Path(sys.executable).parent


def _starts_python(args: object) -> bool:
    """Whether a Popen ``args`` runs this interpreter or one of its console scripts."""
    if isinstance(args, (str, bytes, os.PathLike)):
        parts = shlex.split(os.fsdecode(args))
    else:
        parts = [os.fsdecode(a) for a in args]  # type: ignore[attr-defined]
    return bool(parts) and Path(parts[0]).parent == _SCRIPTS


@pytest.fixture(autouse=True)
def _data_warnings_anew() -> None:
    """Each test sees a split's data warnings as a fresh process would (they are said once per
    process, :func:`bench.data.model.warn_once`)."""
    from bench.data import model

    model._WARNED.clear()


@pytest.fixture(autouse=True)
def _processes_are_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that starts a Python process carries the ``processes`` marker, so ``-m 'not
    processes'`` (the quick loop) truly leaves every such test out; an unmarked one fails here,
    at its first ``subprocess`` call, naming the marker. (Other commands, e.g. git, are free.)"""
    if request.node.get_closest_marker("processes"):
        return
    real = subprocess.Popen

    class Guarded(real):  # type: ignore[valid-type, misc]
        def __init__(self, args: object, *rest: object, **kwargs: object) -> None:
            if _starts_python(args):
                pytest.fail(
                    f"{request.node.nodeid} starts a Python process ({args!r:.120}): mark it "
                    "@pytest.mark.processes",
                    pytrace=False,
                )
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Guarded)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real shared datasets (wikiqa, semeval16b, trec-dl19-passage); required, never skipped."""
    path = _shared_data()
    if not (path / "wikiqa").is_dir():
        pytest.fail(f"shared data not found at {path}: set BENCH_DATA_DIR to the shared data")
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random BERT with MiniLM's tokenizer (:func:`toymodels.write_tiny_bert`), written
    once per session; tests read it and never write into it."""
    from toymodels import write_tiny_bert

    return write_tiny_bert(tmp_path_factory.mktemp("tiny-bert") / "bert")


@pytest.fixture(scope="session")
def tiny_bert_no_dropout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT without its internal dropout (the ``dropout`` option sets the head's only):
    with no randomness left, one and two processes (or one pass and micro-batches) must train
    the same way."""
    from toymodels import write_tiny_bert

    path = write_tiny_bert(tmp_path_factory.mktemp("tiny-bert-no-dropout"))
    config = json.loads((path / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (path / "config.json").write_text(json.dumps(config))
    return path


@pytest.fixture()
def results_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty results root so tests never touch the checkout's results/."""
    root = tmp_path / "results"
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(root))
    return root


# -- results made once per session by real processes, for the tests that launch processes --------
#: the one-process bm25 run the launch tests compare with: wikiqa's first 12 test queries
BM25_RUN = ("run", "-r", "bm25", "-d", "wikiqa", "--threads", "1", "--subset", "12")
#: the one-process training of monoBERT on the tiny BERT the launch tests score or train beside
#: (where the work runs is checked, not what the model learns)
TINY_MONOBERT_TRAIN = ("train", "-r", "monobert", "-d", "wikiqa", "--threads", "1")
TINY_MONOBERT_TRAIN += ("--train-subset", "8", "--set", "epochs=1", "--set", "min_steps=0")


def _prepared_root(tmp_path_factory: pytest.TempPathFactory, data: Path, *args: str) -> Path:
    from commands import BENCH, ok, run_command

    root = tmp_path_factory.mktemp("prepared") / "results"
    ok(run_command(root, data, [*BENCH, *args], timeout=400))
    return root


@pytest.fixture(scope="session")
def bm25_run_root(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results root holding :data:`BM25_RUN`, made once per session by one ``bench`` process
    (each launch test would otherwise start one to compare with). Read it; a test that writes
    takes a copy (``shutil.copytree``)."""
    return _prepared_root(tmp_path_factory, shared_data, *BM25_RUN)


@pytest.fixture(scope="session")
def tiny_monobert_root(
    shared_data: Path, tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A results root holding the model :data:`TINY_MONOBERT_TRAIN` trains from :func:`tiny_bert`
    (``--model``), trained once per session by one ``bench`` process. A test that writes takes a
    copy (``shutil.copytree``)."""
    return _prepared_root(
        tmp_path_factory, shared_data, *TINY_MONOBERT_TRAIN, "--model", str(tiny_bert)
    )
