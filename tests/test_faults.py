"""Fault injection: every defect class found so far, pinned by its reproduction.

Stale or half-present cache entries, changed code, cards and relevance levels, concurrent runs,
unwritable and full folders, damaged models and checkpoints, out-of-range options and the small
misleading messages. Each test names the class it pins (1-19). The CLI tests use the real shared
data where the defect showed on it; cache mechanics use a toy dataset and a fake trainable
ranker, so they need no model weights.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import shutil
import stat
import subprocess
import threading
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from commands import BENCH, PROJECT_ROOT, bench_env
from toydata import write_toy_mteb
from typer.testing import CliRunner

from bench.cli.main import app
from bench.core import provenance
from bench.core.io import atomic_write_text
from bench.data.cards import get_card
from bench.data.model import CandidateList, RankingSplit
from bench.data.splits import load_split
from bench.execution.keys import scoring_code
from bench.execution.ranker_settings import ranker_options, settings_file
from bench.execution.runner import RunOptions, fit_or_load, run
from bench.reporting.checks import MISSING, OK, check_report
from bench.results.cache import MANIFEST, entry_lock, manifest_problem, state_problem
from bench.results.records import PER_QUERY, RECORD, RUN_FILE, file_sha256, load_records
from rankers import RankerError, create_ranker
from rankers.base import Ranker, RankerConfig
from rankers.io.persist import read_saved

cli = CliRunner()


def invoke(*args: str, code: int = 0) -> str:
    """Run the CLI in-process; the exit code must be ``code`` and no traceback may show."""
    result = cli.invoke(app, list(args))
    assert result.exit_code == code, result.output + repr(result.exception)
    assert "Traceback" not in result.output
    return result.output


def flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


def toy_options(tmp_path: Path, ranker: str = "bm25", **fields: Any) -> RunOptions:
    """``ranker`` on a toy MTEB dataset (train/dev/test) under ``tmp_path``, CPU, quiet."""
    data = tmp_path / "data"
    if not (data / "toy").exists():
        write_toy_mteb(data / "toy")
    base: dict[str, Any] = {"warmup": 1, "progress": False, "device": "cpu"}
    return RunOptions(ranker=ranker, dataset="toy", data_dir=data, **{**base, **fields})


@dataclasses.dataclass
class FakeConfig(RankerConfig):
    epochs: int = 1


class FakeTrainable(Ranker):
    """A trainable ranker without weights to learn: records how it was fitted, saves a small
    weights file, and can simulate an interrupted run that left a damaged checkpoint."""

    name = "fake"
    family = "sparse"
    trainable = True
    Config = FakeConfig
    WEIGHTS = bytes(range(256)) * 16

    def __init__(self, interrupt_with_damaged_state: bool = False) -> None:
        super().__init__(FakeConfig(), "cpu")
        self.interrupt = interrupt_with_damaged_state
        self.fits: list[dict[str, Any]] = []
        self.loads = 0

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        return [np.zeros(len(cl)) for cl in lists]

    def fit(self, train: RankingSplit, dev: RankingSplit | None = None) -> dict[str, Any]:
        assert self.work_dir is not None
        state = self.work_dir / "checkpoint"
        self.fits.append({"dev": dev.split if dev else None, "resumable": state.exists()})
        if self.interrupt:
            folder = state / "epoch001-step0000004"
            folder.mkdir(parents=True)
            (state / "latest.json").write_text(json.dumps({"key": "k", "state": folder.name}))
            with zipfile.ZipFile(folder / "optimizer.bin", "w") as archive:
                archive.writestr("data.pkl", b"x" * 4096)
            data = (folder / "optimizer.bin").read_bytes()
            (folder / "optimizer.bin").write_bytes(data[: len(data) // 2])  # torn write
            raise KeyboardInterrupt
        return {"epochs": 1, "checkpoint": str(state)}

    def save(self, path: Path) -> None:
        super().save(path)
        (path / "weights.bin").write_bytes(self.WEIGHTS)

    def load(self, path: Path) -> None:
        if (path / "weights.bin").read_bytes() != self.WEIGHTS:
            raise ValueError(f"{path / 'weights.bin'}: unexpected weights")
        self.loads += 1


@pytest.fixture()
def env(shared_data: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BENCH_DATA_DIR", str(shared_data))
    return results_dir


@pytest.fixture()
def fresh_code() -> Iterator[None]:
    """Read the package versions again in this test and after it (read once per process)."""
    cached = provenance.key_versions  # a test may replace it; clear the real one
    cached.cache_clear()
    yield
    cached.cache_clear()


def _entries(root: Path, dataset: str, ranker: str) -> list[Path]:
    return sorted(p for p in (root / "runs" / dataset / ranker).iterdir() if p.is_dir())


# -- 1. the code is part of every cache key ------------------------------------------------------
def test_code_fingerprint_changes_when_a_ranker_source_changes(tmp_path: Path) -> None:
    rankers = tmp_path / "rankers"
    shutil.copytree(
        provenance.package_folder("rankers"),
        rankers,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    before = provenance.sources_digest({"rankers": rankers})
    (rankers / "__pycache__").mkdir()
    (rankers / "__pycache__" / "bm25.cpython.pyc").write_bytes(b"compiled")
    assert provenance.sources_digest({"rankers": rankers}) == before  # caches do not count
    bm25 = rankers / "inputs" / "lexical.py"
    source = bm25.read_text()
    assert "text.lower()" in source  # the edit below changes the file
    bm25.write_text(source.replace("text.lower()", "text"))
    edited = provenance.sources_digest({"rankers": rankers})
    assert edited != before
    # a settings file is part of the code too: editing it changes the digest again
    config = rankers / "configs" / "crossjem.yaml"
    config.write_text(config.read_text() + "# edited\n")
    assert provenance.sources_digest({"rankers": rankers}) not in (before, edited)
    versions = provenance.key_versions()
    assert set(versions) == set(provenance.KEY_PACKAGES) and versions["torch"]


def test_changed_ranker_code_recomputes_a_cached_result_and_says_why(
    tmp_path: Path,
    results_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fresh_code: None,
) -> None:
    opts = toy_options(tmp_path)
    first = run(opts)
    assert first.provenance["code"] == scoring_code("rankers.families.bm25", settings_file("bm25"))
    assert set(first.key_parts) == {"config", "data", "model", "code"}
    assert run(opts).path == first.path  # same code: reused

    # BM25's tokenize (rankers/inputs/lexical.py) changes: the rerun must not reuse
    edited = tmp_path / "installed" / "rankers"
    shutil.copytree(
        provenance.package_folder("rankers"), edited, ignore=shutil.ignore_patterns("__pycache__")
    )
    source = edited / "inputs" / "lexical.py"
    source.write_text(source.read_text().replace("text.lower()", "text"))
    real = provenance.package_folder
    monkeypatch.setattr(
        provenance, "package_folder", lambda name: edited if name == "rankers" else real(name)
    )
    caplog.set_level(logging.INFO)
    caplog.clear()  # only the rerun's log (a CLI test run before may have left INFO on)
    second = run(opts)
    assert second.path != first.path and second.created >= first.created
    assert second.key_parts["config"] == first.key_parts["config"]
    assert second.key_parts["code"] != first.key_parts["code"]
    assert f"code changed since {first.path} (rankers/inputs/lexical.py changed)" in caplog.text
    assert "reusing" not in caplog.text


def test_changed_package_version_retrains_a_cached_model(
    tmp_path: Path,
    results_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fresh_code: None,
) -> None:
    opts = toy_options(tmp_path, "fake")
    ranker = FakeTrainable()
    first = fit_or_load(ranker, opts, results_dir)
    assert fit_or_load(FakeTrainable(), opts, results_dir)["key"] == first["key"]  # loaded

    real = provenance.key_versions()
    changed = {**real, "torch": "0.0.1"}
    monkeypatch.setattr(provenance, "key_versions", lambda: changed)
    caplog.set_level(logging.INFO)
    again = FakeTrainable()
    second = fit_or_load(again, opts, results_dir)
    assert again.fits and second["key"] != first["key"]
    assert second["code"]["versions"] == changed
    assert second["code"]["files"] == first["code"]["files"]
    assert (
        f"training fake anew: code changed since {first['model_dir']} "
        f"(torch {real['torch']} -> 0.0.1)"
    ) in caplog.text


# -- 2. a cached result is verified before it is reused ------------------------------------------
def _delete(path: Path) -> None:
    path.unlink()


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:40])


@pytest.mark.parametrize(
    ("name", "damage", "problem"),
    [
        (RUN_FILE, _delete, "run.trec is missing"),
        (PER_QUERY, _delete, "perquery.tsv is missing"),
        (RUN_FILE, _truncate, "run.trec does not match its recorded checksum"),
        (RECORD, _truncate, "record.json: not valid JSON"),
    ],
)
def test_damaged_result_entry_is_moved_aside_and_recomputed(
    tmp_path: Path,
    results_dir: Path,
    caplog: pytest.LogCaptureFixture,
    name: str,
    damage: Any,
    problem: str,
) -> None:
    opts = toy_options(tmp_path)
    first = run(opts)
    assert first.path is not None
    assert first.files == {
        RUN_FILE: file_sha256(first.path / RUN_FILE),
        PER_QUERY: file_sha256(first.path / PER_QUERY),
    }
    run_before = (first.path / RUN_FILE).read_text()
    damage(first.path / name)

    caplog.set_level(logging.WARNING)
    again = run(opts)
    assert again.path == first.path and again.created >= first.created
    assert (first.path / RUN_FILE).read_text() == run_before  # rewritten, same ranking
    assert again.metrics == first.metrics
    (moved,) = [p for p in _entries(results_dir, "toy", "bm25") if p != first.path]
    assert moved.name.startswith(f"{first.path.name}.damaged-")
    warning = flat(caplog.text)
    assert f"{first.path} is damaged:" in warning and problem in warning
    assert f"Moved it to {moved}; recomputing." in warning
    # the moved-aside entry is never read as a result
    assert [r.path for r in load_records(results_dir)] == [first.path]


# -- 3. smoke runs never stand in for full runs --------------------------------------------------
def test_smoke_run_neither_satisfies_nor_fails_a_full_run_expectation(
    env: Path, tmp_path: Path
) -> None:
    expected = tmp_path / "ci.yaml"
    entry = {
        "dataset": "wikiqa",
        "split": "test",
        "ranker": "bm25",
        "metric": "AP@10",
        "expected": 0.6175,
        "tolerance": 0.0005,
    }
    expected.write_text(yaml.safe_dump([entry]))
    invoke("-q", "run", "-r", "bm25", "-d", "wikiqa", "--subset", "5")
    out = flat(invoke("check", "--expected", str(expected), code=1))
    assert "MISSING wikiqa/test bm25 AP@10" in out
    assert "settings this entry does not name (subset=5)" in out

    invoke("-q", "run", "-r", "bm25", "-d", "wikiqa")
    invoke("-q", "run", "-r", "bm25", "-d", "wikiqa", "--subset", "5", "--force")  # newest
    (full,) = [r for r in load_records(env) if r.data["queries"] == 243]
    out = flat(invoke("check", "--expected", str(expected)))
    assert "OK wikiqa/test bm25 AP@10 expected 0.6175 ± 0.0005 actual 0.6175" in out
    assert f"[{full.path}]" in out

    entry["config"] = {"subset": 5}
    expected.write_text(yaml.safe_dump([entry]))
    out = flat(invoke("check", "--expected", str(expected), code=1))
    assert "FAIL wikiqa/test bm25 (subset=5) AP@10" in out  # the smoke run, when asked for


def test_overrides_name_what_differs_from_the_default_full_run(
    tmp_path: Path, results_dir: Path
) -> None:
    plain = run(toy_options(tmp_path))
    tuned = run(toy_options(tmp_path, options={"k1": "1.2", "b": "0.4"}, subset=2, seed=3))
    assert plain.overrides == {}
    assert tuned.overrides == {"k1": 1.2, "subset": 2, "seed": 3}  # b=0.4 is the default
    path = tmp_path / "e.yaml"
    path.write_text(
        "- {dataset: toy, split: test, ranker: bm25, metric: AP@10, expected: 0, tolerance: 1}\n"
        "- {dataset: toy, split: test, ranker: bm25, config: {k1: 1.2, subset: 2},\n"
        "   metric: AP@10, expected: 0, tolerance: 1}\n"
        "- {dataset: toy, split: test, ranker: bm25, config: {k1: 1.2, subset: 2, seed: 3},\n"
        "   metric: AP@10, expected: 0, tolerance: 1}\n"
    )
    results = check_report(path, load_records(results_dir)).results
    assert [r.status for r in results] == [OK, MISSING, OK]
    assert [r.record.path if r.record else None for r in results] == [
        plain.path,
        None,
        tuned.path,
    ]
    assert "(seed=3)" in results[1].message


# -- 4. out-of-range options are rejected before any work ----------------------------------------
@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["run", "-r", "bm25", "-d", "wikiqa", "--subset", "0"], "--subset"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--subset", "-3"], "--subset"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--train-subset", "0"], "--train-subset"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--train-subset", "-5"], "--train-subset"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--warmup", "-2"], "--warmup"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--batch-queries", "0"], "--batch-queries"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--threads", "0"], "--threads"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--seed", "-1"], "--seed"),
        (["train", "-r", "monobert", "-d", "wikiqa", "--train-subset", "0"], "--train-subset"),
        (["compare", "--alpha", "5"], "--alpha"),
        (["compare", "--alpha", "0"], "--alpha"),
        (["demo", "--subset", "0"], "--subset"),
        (["ablate", "-d", "wikiqa", "--subset", "0"], "--subset"),
        (["plot", "-d", "wikiqa", "--use-benchmark", "--n", "0"], "--n"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--set", "k1=-1"], "k1=-1.0: must be >= 0"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--set", "b=2"], "b=2.0: must be between 0 and 1"),
    ],
)
def test_out_of_range_option_is_rejected_before_any_work(
    env: Path, args: list[str], option: str
) -> None:
    out = flat(invoke(*args, code=2))
    assert option in out
    assert not list(env.glob("runs/*/*/*")) and not (env / "models").exists()


def test_run_options_reject_out_of_range_counts() -> None:
    for field, value in (("subset", 0), ("train_subset", -5), ("warmup", -2), ("seed", -1)):
        with pytest.raises(ValueError, match=f"--{field.replace('_', '-')} must be >= "):
            RunOptions(ranker="bm25", dataset="wikiqa", **{field: value})


# -- 5. a folder with both layouts ----------------------------------------------------------------
def _write_trec(folder: Path, scores: Sequence[str] = ("3.0", "2.0", "1.0")) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "queries.tsv").write_text("q1\tred apple\nq2\tgreen pear\n")
    (folder / "collection.tsv").write_text(
        "d1\tred apple pie\nd2\tgreen pear tart\nd3\tblue plum\n"
    )
    (folder / "qrels.txt").write_text("q1 0 d1 2\nq1 0 d3 1\nq2 0 d2 1\nq2 0 d3 2\n")
    (folder / "run.bm25.trec").write_text(
        "".join(
            f"{q} Q0 {d} {rank} {score} bm25\n"
            for q in ("q1", "q2")
            for rank, (d, score) in enumerate(zip(("d1", "d2", "d3"), scores, strict=True), 1)
        )
    )


def test_folder_with_both_layouts_is_an_error_naming_both(
    tmp_path: Path, results_dir: Path
) -> None:
    data = tmp_path / "data"
    write_toy_mteb(data / "both", (("test", 4),))
    _write_trec(data / "both")
    write_toy_mteb(data / "fine", (("test", 4),))
    out = flat(invoke("run", "-r", "bm25", "-d", "both", "--data-dir", str(data), code=2))
    assert (
        f"error: {data / 'both'} holds files of both layouts: MTEB split files (test.jsonl) and "
        "TREC files (queries.tsv, collection.tsv, qrels.txt, run.bm25.trec)"
    ) in out
    for name in ("queries.tsv", "collection.tsv", "qrels.txt", "run.bm25.trec", "card.yaml"):
        assert name in out
    # the listing still shows every dataset, the ambiguous one with '-' and a warning
    out = invoke("datasets", "--no-wordpiece", "--data-dir", str(data))
    assert "holds files of both layouts" in flat(out)
    (row,) = [line for line in out.splitlines() if "│ fine" in line]
    assert "test" in row and "4" in row
    (data / "both" / "card.yaml").write_text("layout: mteb\n")
    invoke("-q", "run", "-r", "bm25", "-d", "both", "--data-dir", str(data))


# -- 6. the relevance level and the card are part of the key -------------------------------------
def test_card_in_the_data_folder_is_read_and_a_new_relevance_level_recomputes(
    shared_data: Path, tmp_path: Path, results_dir: Path
) -> None:
    data = tmp_path / "data"
    copy = data / "dl19copy"
    copy.mkdir(parents=True)
    for f in (shared_data / "trec-dl19-passage").iterdir():
        (copy / f.name).symlink_to(f)
    args = ("run", "-r", "firststage", "-d", "dl19copy", "--data-dir", str(data))
    out = flat(invoke("-q", *args))
    assert out.count("no dataset card") == 1  # warned (not INFO, so -q shows it), and once
    assert "count grade >= 1 as relevant" in out and str(copy / "card.yaml") in out
    (grade1,) = load_records(results_dir)
    assert grade1.data["card"]["default"] is True and grade1.data["relevance_level"] == 1

    (copy / "card.yaml").write_text("layout: trec\nrelevance_level: 2\nrun_file: run.bm25.trec\n")
    out = flat(invoke(*args))
    assert "reusing" not in out
    assert "data or dataset card changed since" in out
    grade2 = next(r for r in load_records(results_dir) if r.path != grade1.path)
    assert grade2.data["relevance_level"] == 2
    assert grade2.data["card"]["card_file"] == str(copy / "card.yaml")
    # the official TREC DL level gives the README's first-stage row (AP@10 0.1272)
    assert round(grade2.metrics["AP@10"], 4) == 0.1272
    assert grade1.metrics["AP@10"] != grade2.metrics["AP@10"]


def test_split_fingerprint_covers_card_facts_not_descriptions(tmp_path: Path) -> None:
    write_toy_mteb(tmp_path / "toy", (("test", 4),))
    plain = load_split("toy", "test", tmp_path)
    (tmp_path / "toy" / "card.yaml").write_text("layout: mteb\ndescription: toy data\n")
    described = load_split("toy", "test", tmp_path)
    assert described.card["description"] == "toy data"
    assert described.fingerprint() == plain.fingerprint()  # same facts, same key
    (tmp_path / "toy" / "card.yaml").write_text("layout: mteb\ndefault_split: dev\n")
    assert load_split("toy", "test", tmp_path).fingerprint() != plain.fingerprint()
    assert get_card("toy", tmp_path).default_split == "dev"


# -- 7. development split names -------------------------------------------------------------------
@pytest.mark.parametrize("dev_name", ["dev", "validation", "val"])
def test_each_usual_dev_split_name_selects_the_epoch(
    tmp_path: Path, results_dir: Path, caplog: pytest.LogCaptureFixture, dev_name: str
) -> None:
    write_toy_mteb(tmp_path / "data" / "toy", (("train", 6), (dev_name, 3), ("test", 3)))
    caplog.set_level(logging.INFO)
    ranker = FakeTrainable()
    summary = fit_or_load(ranker, toy_options(tmp_path, "fake"), results_dir)
    assert ranker.fits == [{"dev": dev_name, "resumable": False}]
    assert summary["dev"]["split"] == dev_name
    assert f"selecting on {dev_name} (3 queries)" in caplog.text


def test_missing_dev_split_is_said(
    tmp_path: Path, results_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_toy_mteb(tmp_path / "data" / "toy", (("train", 6), ("test", 3)))
    caplog.set_level(logging.INFO)
    ranker = FakeTrainable()
    fit_or_load(ranker, toy_options(tmp_path, "fake"), results_dir)
    assert ranker.fits == [{"dev": None, "resumable": False}]
    (warning,) = [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == "bench.execution.runner"
    ]
    assert warning.getMessage() == (
        "toy has no development split (none of dev/validation/val among test, train): no epoch "
        "is selected on dev, training keeps its last epoch"
    )


# -- 8. file modes follow the umask ---------------------------------------------------------------
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_follow_the_umask(
    tmp_path: Path, results_dir: Path, umask: int, mode: int
) -> None:
    old = os.umask(umask)
    try:
        record = run(toy_options(tmp_path))
        summary = fit_or_load(FakeTrainable(), toy_options(tmp_path, "fake"), results_dir)
        atomic_write_text(tmp_path / "plain.txt", "x")
    finally:
        os.umask(old)
    assert record.path is not None
    model = Path(summary["model_dir"])
    for path in (
        record.path / RECORD,
        record.path / RUN_FILE,
        record.path / PER_QUERY,
        model / "training.json",
        model / MANIFEST,
        tmp_path / "plain.txt",
    ):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


# -- 9. unwritable and full folders ---------------------------------------------------------------
def _refuse_writes_under(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``folder`` read-only; as root (which ignores modes) refuse creating files and folders
    under it the way the kernel refuses other users."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o555)
    if os.geteuid() != 0:
        return
    inside = folder.resolve()

    def guard(real: Any) -> Any:
        def guarded(path: Any, *args: Any, **kwargs: Any) -> Any:
            if Path(os.fsdecode(path)).resolve().is_relative_to(inside):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(path))
            return real(path, *args, **kwargs)

        return guarded

    monkeypatch.setattr(os, "open", guard(os.open))
    monkeypatch.setattr(os, "mkdir", guard(os.mkdir))


def test_read_only_results_folder_fails_before_any_work(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refuse_writes_under(env, monkeypatch)
    out = flat(invoke("run", "-r", "bm25", "-d", "wikiqa", code=2))
    assert f"error: the results folder {env / 'runs'} is not writable: cannot write" in out
    assert "Permission denied" in out and "bm25 on wikiqa" not in out


def test_results_folder_under_a_file_fails_before_any_work(
    shared_data: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    out = flat(invoke("run", "-r", "bm25", "-d", "wikiqa", "--results-dir", str(blocker), code=2))
    assert f"the results folder {blocker / 'runs'} is not writable" in out
    assert "Not a directory" in out
    out = flat(
        invoke("train", "-r", "monobert", "-d", "wikiqa", "--results-dir", str(blocker), code=2)
    )
    assert f"the models folder {blocker / 'models'} is not writable" in out
    assert "fine-tuning" not in out and " fit:" not in out  # stopped before training began


def test_full_disk_at_write_time_is_one_error_naming_the_file(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    out = flat(invoke("-q", "run", "-r", "bm25", "-d", "semeval16b", code=2))
    (lock,) = env.glob("runs/semeval16b/bm25/test-*.lock")
    entry = lock.with_suffix("")
    assert f"error: cannot write {entry / RUN_FILE}: No space left on device" in out
    assert not entry.exists()  # no record, no temporary file, no empty entry folder


def test_full_disk_at_the_entry_lock_names_the_lock_file(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk fails first where the run writes its first bytes, its entry's lock file
    (the holder's pid and command): the error names that file, as every other write does
    (a bare "No space left on device" named nothing, under --processes 2 too)."""

    def full(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", full)
    out = flat(invoke("-q", "run", "-r", "bm25", "-d", "semeval16b", code=2))
    (lock,) = env.glob("runs/semeval16b/bm25/test-*.lock")
    assert f"error: cannot write {lock}: No space left on device" in out
    assert not lock.with_suffix("").exists()


def test_unreadable_dataset_file_does_not_break_the_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    write_toy_mteb(data / "good", (("test", 4),))
    write_toy_mteb(data / "locked", (("test", 4),))
    locked = data / "locked" / "test.jsonl"
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self == locked:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    out = invoke("datasets", "--no-wordpiece", "--data-dir", str(data))
    assert f"locked: not available: {locked}: cannot read it (Permission denied)" in flat(out)
    (good,) = [line for line in out.splitlines() if "│ good" in line]
    (bad,) = [line for line in out.splitlines() if "│ locked" in line]
    assert "test" in good and "│ -" in bad


# -- 10. identical runs at once -------------------------------------------------------------------
def test_second_identical_run_waits_for_the_running_one_then_reuses_it(
    tmp_path: Path, results_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    opts = toy_options(tmp_path)
    first = run(opts)
    assert first.path is not None
    kept = tmp_path / "kept"
    shutil.copytree(first.path, kept)
    shutil.rmtree(first.path)
    caplog.set_level(logging.INFO)
    out: dict[str, Any] = {}
    with entry_lock(first.path, "the first run"):
        waiter = threading.Thread(target=lambda: out.setdefault("record", run(opts)))
        waiter.start()
        deadline = time.monotonic() + 60
        while "the same work is already running" not in caplog.text:
            assert time.monotonic() < deadline and waiter.is_alive()
            time.sleep(0.05)
        assert f"(pid {os.getpid()} on " in caplog.text
        assert waiter.is_alive()  # waiting, not computing
        shutil.copytree(kept, first.path)  # the first run finishes its entry
    waiter.join(60)
    assert out["record"].path == first.path and out["record"].created == first.created
    assert "the other run has finished" in caplog.text and "reusing" in caplog.text


@pytest.mark.slow
@pytest.mark.processes
def test_two_identical_trainings_at_once_both_succeed(tmp_path: Path, tiny_bert: Path) -> None:
    """The reproduction: two `bench train` processes for the same model. Both wait while
    the entry is locked (here by the test, so they surely overlap) and say so with the holder's
    pid; then one trains while the other keeps waiting, and loads the result."""
    data = write_toy_mteb(tmp_path / "data" / "toy").parent
    options = {"model": str(tiny_bert), "epochs": 1, "max_item_len": 8}
    # the model key does not depend on the results folder: learn it by training elsewhere
    ranker = create_ranker("monobert", ranker_options("monobert", "toy", options))
    opts = RunOptions(ranker="monobert", dataset="toy", data_dir=data, device="cpu")
    key = fit_or_load(ranker, opts, tmp_path / "elsewhere")["key"]
    results = tmp_path / "results"
    env = bench_env(data, results, TRANSFORMERS_OFFLINE="1")
    command = [
        *(*BENCH, "train", "-r", "monobert", "-d", "toy"),
        *("--model", str(tiny_bert), "--set", "epochs=1", "--set", "max_item_len=8"),
        *("--threads", "1", "--device", "cpu"),
    ]
    logs = [tmp_path / f"train{i}.log" for i in range(2)]
    with entry_lock(results / "models" / "toy" / "monobert" / key, "the test"):
        procs = []
        for log in logs:
            with log.open("wb") as err:
                procs.append(
                    subprocess.Popen(
                        command, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=err
                    )
                )
        deadline = time.monotonic() + 240
        while not all("already running" in log.read_text() for log in logs):
            assert time.monotonic() < deadline
            assert all(p.poll() is None for p in procs), [log.read_text() for log in logs]
            time.sleep(0.2)
    outs = [p.communicate(timeout=300)[0] for p in procs]
    texts = [flat(log.read_text()) for log in logs]
    for proc, text in zip(procs, texts, strict=True):
        assert proc.returncode == 0 and "Traceback" not in text, text
        assert f"the same work is already running (pid {os.getpid()} on " in text
    (trainer,) = [i for i, t in enumerate(texts) if "training monobert on toy/train" in t]
    loader = 1 - trainer
    assert "loading trained monobert" in texts[loader]
    assert "training monobert" not in texts[loader]
    dirs = {json.loads(out)["model_dir"] for out in outs}
    assert dirs == {str(results / "models" / "toy" / "monobert" / key)}
    assert manifest_problem(Path(dirs.pop())) is None


# -- 11. damaged models and checkpoints -----------------------------------------------------------
@pytest.mark.slow
def test_truncated_model_weights_are_moved_aside_and_retrained(
    tmp_path: Path, results_dir: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    options = {"model": str(tiny_bert), "epochs": "1", "max_item_len": "8"}
    opts = toy_options(tmp_path, "monobert", options=options, warmup=0)
    first = run(opts)
    assert first.training is not None and first.training["checkpoint"] is None
    model = Path(first.training["model_dir"])
    assert manifest_problem(model) is None
    weights = max(model.rglob("*.safetensors"), key=lambda p: p.stat().st_size)
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])

    given = weights.relative_to(model)
    copy = tmp_path / "given"
    shutil.copytree(model, copy)

    caplog.set_level(logging.WARNING)
    assert run(opts).path == first.path  # the cached run needs no model: nothing is loaded
    assert "does not match" not in caplog.text
    # the plan needs the model for a run not cached yet: it is checked, moved aside, retrained
    again = run(dataclasses.replace(opts, subset=3))
    assert again.training is not None
    assert again.training["dev_AP@10"] == first.training["dev_AP@10"]
    assert f"{weights} does not match its recorded checksum" in flat(caplog.text)
    assert manifest_problem(model) is None  # retrained into place
    (moved,) = model.parent.glob(f"{model.name}.damaged-*")
    assert (moved / given).stat().st_size < weights.stat().st_size

    # a folder given by the user is checked when loaded: one error naming the file
    with pytest.raises(RankerError, match=r"damaged monobert checkpoint: .*not a readable"):
        read_saved(copy, "monobert")
    out = flat(
        invoke(
            *("run", "-r", "monobert", "-d", "toy", "--data-dir", str(tmp_path / "data")),
            *("--set", f"checkpoint={copy}", "--results-dir", str(tmp_path / "other")),
            code=2,
        )
    )
    # the copy carries the save's manifest, which names the damaged file first
    assert f"{copy / given} does not match its recorded checksum" in out


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda d: (d / "training.json").write_text('{"epochs": '), "training.json does not match"),
        (lambda d: (d / MANIFEST).unlink(), "manifest.json is missing"),
        (lambda d: (d / "weights.bin").write_bytes(b"\0"), "weights.bin does not match"),
    ],
)
def test_damaged_model_folder_is_moved_aside_and_retrained(
    tmp_path: Path,
    results_dir: Path,
    caplog: pytest.LogCaptureFixture,
    damage: Any,
    problem: str,
) -> None:
    opts = toy_options(tmp_path, "fake")
    first = fit_or_load(FakeTrainable(), opts, results_dir)
    model = Path(first["model_dir"])
    damage(model)
    caplog.set_level(logging.WARNING)
    ranker = FakeTrainable()
    again = fit_or_load(ranker, opts, results_dir)
    assert len(ranker.fits) == 1 and again["key"] == first["key"]
    assert problem in caplog.text and manifest_problem(model) is None
    assert len(list(model.parent.glob(f"{model.name}.damaged-*"))) == 1


def test_model_folder_that_fails_to_load_is_moved_aside(
    tmp_path: Path, results_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    opts = toy_options(tmp_path, "fake")
    model = Path(fit_or_load(FakeTrainable(), opts, results_dir)["model_dir"])
    broken = FakeTrainable()
    broken.WEIGHTS = b"other"  # the folder's files are whole, but this ranker cannot load them
    caplog.set_level(logging.WARNING)
    fit_or_load(broken, opts, results_dir)
    assert len(broken.fits) == 1 and broken.loads == 0
    assert "it cannot be loaded (ValueError: " in caplog.text
    assert len(list(model.parent.glob(f"{model.name}.damaged-*"))) == 1


def test_damaged_resumable_checkpoint_is_set_aside_and_training_restarts(
    tmp_path: Path, results_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    opts = toy_options(tmp_path, "fake")
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C mid-write left a torn optimizer state
        fit_or_load(FakeTrainable(interrupt_with_damaged_state=True), opts, results_dir)
    (work,) = results_dir.glob("models/toy/fake/*.tmp")
    caplog.set_level(logging.WARNING)
    ranker = FakeTrainable()
    summary = fit_or_load(ranker, opts, results_dir)
    assert ranker.fits == [{"dev": "dev", "resumable": False}]
    assert "optimizer.bin is not a readable torch.save archive" in caplog.text
    assert "training starts from scratch" in caplog.text
    (moved,) = work.parent.glob(f"{work.name}.damaged-*")
    assert (moved / "latest.json").is_file()
    assert manifest_problem(Path(summary["model_dir"])) is None


def test_state_problem_checks_archives_and_safetensors(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    torch.save({"step": torch.zeros(64)}, tmp_path / "optimizer.bin")
    save_file({"w": torch.zeros(64)}, str(tmp_path / "model.safetensors"))
    assert state_problem(tmp_path) is None
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[:-10])
    assert "model.safetensors is not a readable safetensors file" in str(state_problem(tmp_path))


# -- 12. bad expected values ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("values", "key"),
    [
        ("expected: .nan, tolerance: 0.1", "expected"),
        ("expected: 0.5, tolerance: .inf", "tolerance"),
    ],
)
def test_non_finite_expected_values_are_rejected(
    env: Path, tmp_path: Path, values: str, key: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"- {{dataset: wikiqa, split: test, ranker: bm25, metric: AP@10, {values}}}\n")
    out = flat(invoke("check", "--expected", str(path), code=2))
    assert f"{path}: entry 0: bad key '{key}': expected a finite number" in out


# -- 13. messages that say what is wrong ----------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message", "not_said"),
    [
        (
            ["train", "-r", "crossjem", "-d", "wikiqa", "--teacher", "/nonexistent/dir"],
            "crossjem: teacher folder /nonexistent/dir does not exist",
            "unknown ranker",
        ),
        (
            ["train", "-r", "crossjem", "-d", "wikiqa", "--teacher", "bm25"],
            "crossjem: teacher 'bm25' is not a trainable ranker",
            "--fit",
        ),
        (
            ["train", "-r", "bm25", "-d", "wikiqa"],
            "ranker 'bm25' is not trainable, so `bench train` has nothing to do",
            "--fit",
        ),
    ],
)
def test_messages_name_the_actual_problem(
    env: Path, args: list[str], message: str, not_said: str
) -> None:
    out = flat(invoke(*args, code=2))
    assert message in out and not_said not in out
    assert not (env / "models").exists() or not list((env / "models").rglob("training.json"))


def test_nan_score_in_a_run_file_names_file_and_line(tmp_path: Path, results_dir: Path) -> None:
    data = tmp_path / "data"
    _write_trec(data / "nanrun", scores=("3.0", "nan", "1.0"))
    out = flat(invoke("run", "-r", "firststage", "-d", "nanrun", "--data-dir", str(data), code=2))
    assert f"{data / 'nanrun' / 'run.bm25.trec'}:2: score 'nan' is not a finite number" in out


# -- 14. small things -----------------------------------------------------------------------------
def test_ctrl_c_says_what_was_kept_and_exits_130(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr("bench.execution.scoring.score_split", interrupted)
    out = flat(invoke("run", "-r", "bm25", "-d", "semeval16b", code=130))
    assert "interrupted: finished results and trained models are kept" in out
    assert "rerun the same command to go on" in out
    assert not list(env.glob("runs/*/*/*/record.json"))


def test_sigterm_is_handled_as_ctrl_c_and_removes_temporary_folders(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM to a one-process run exited 143 at once: no `interrupted:` line, and a SIGTERM
    during the ONNX export left its empty bench-onnx-* folder. It unwinds as Ctrl-C: the line,
    143 (128 + SIGTERM), the temporary folder removed, no record, the old handler back."""
    import os
    import signal
    import tempfile
    import time

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    made: list[Path] = []

    def exporting(*args: Any, **kwargs: Any) -> Any:
        with tempfile.TemporaryDirectory(prefix="bench-onnx-") as folder:
            made.append(Path(folder))
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # the handler interrupts this at once

    def unhandled(signum: int, frame: Any) -> None:  # the test process must not die of it
        raise RuntimeError("SIGTERM reached the process's own handler")

    monkeypatch.setattr("bench.execution.scoring.score_split", exporting)
    before = signal.signal(signal.SIGTERM, unhandled)
    started = time.monotonic()
    try:
        out = flat(invoke("run", "-r", "bm25", "-d", "semeval16b", code=143))
        assert signal.getsignal(signal.SIGTERM) == unhandled  # given back after the command
    finally:
        signal.signal(signal.SIGTERM, before)
    assert time.monotonic() - started < 25
    assert "interrupted: finished results and trained models are kept" in out
    assert "Traceback" not in out
    assert made and made[0].name.startswith("bench-onnx-") and list(temp.iterdir()) == []
    assert not list(env.glob("runs/*/*/*/record.json"))


def test_training_summary_does_not_point_at_the_deleted_checkpoint(
    tmp_path: Path, results_dir: Path
) -> None:
    summary = fit_or_load(FakeTrainable(), toy_options(tmp_path, "fake"), results_dir)
    saved = json.loads((Path(summary["model_dir"]) / "training.json").read_text())
    assert saved["checkpoint"] is None and summary["checkpoint"] is None
    assert not list(results_dir.glob("models/**/*.tmp"))


def test_progress_is_logged_when_stderr_is_not_a_terminal(env: Path) -> None:
    out = flat(invoke("run", "-r", "bm25", "-d", "semeval16b"))
    assert "bm25 on semeval16b/test: 6/59 q (10%)" in out
    assert "bm25 on semeval16b/test: 59/59 q (100%)" in out


def test_datasets_caption_without_wordpiece_says_words(env: Path) -> None:
    out = flat(invoke("datasets", "--no-wordpiece"))
    assert "lengths: mean words;" in out and "words tokens" not in out


# -- 15. `bench latency --threads` has bench run's declared range ----------------------------------
@pytest.mark.parametrize("threads", ["0", "-1"])
def test_latency_threads_out_of_range_is_rejected_before_any_work(env: Path, threads: str) -> None:
    out = flat(
        invoke("latency", "-d", "semeval16b", "--rankers", "bm25", "--threads", threads, code=2)
    )
    assert "Invalid value for '--threads': Input should be greater than or equal to 1" in out
    assert not (env / "latency").exists() and not (env / "models").exists()


def test_latency_options_reject_zero_threads() -> None:
    from bench.latency.plan import BenchOptions

    with pytest.raises(ValueError, match="--threads must be >= 1, not 0"):
        BenchOptions(dataset="semeval16b", threads=0).validate()


# -- 16. a `--set` key given twice -----------------------------------------------------------------
def test_sweep_merges_the_values_of_a_repeated_set_key(env: Path) -> None:
    out = invoke(
        "-q", "sweep", "-r", "bm25", "-d", "semeval16b", "--no-write",
        "--set", "k1=0.9", "--set", "k1=1.5",
    )  # fmt: skip
    rows = [line.split()[0] for line in out.splitlines() if line.startswith(("0.9 ", "1.5 "))]
    assert rows == ["0.9", "1.5"]
    (saved,) = env.glob("sweeps/semeval16b/bm25-*.json")
    sweep = json.loads(saved.read_text())
    assert sweep["command"] == "bench sweep -r bm25 -d semeval16b --set k1=0.9,1.5"
    assert [r["settings"] for r in sweep["rows"]] == [{"k1": "0.9"}, {"k1": "1.5"}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "-r", "bm25", "-d", "semeval16b", "--set", "k1=1", "--set", "k1=2"],
            "--set k1 is given twice (k1=1, k1=2); give it once",
        ),
        (
            [
                "sweep",
                "-r",
                "bm25",
                "-d",
                "semeval16b",
                "--no-write",
                "--set",
                "k1=1",
                "--set",
                "k1=1,2",
            ],
            "--set k1=1,1,2: value 1 is given twice",
        ),
    ],
)
def test_a_repeated_set_key_or_value_is_rejected_naming_it(
    env: Path, args: list[str], message: str
) -> None:
    assert message in flat(invoke(*args, code=2))
    assert not env.exists() or not list(env.glob("runs/*/*/*"))


# -- 17. every input, path and permission is checked before the first job -------------------------
@pytest.fixture()
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any training fails the test: what is checked here must stop before the first one."""

    def train(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a model was trained before the inputs were checked")

    monkeypatch.setattr("bench.execution.fitting._train", train)


@pytest.mark.parametrize(
    "args",
    [
        ["train", "-r", "crossjem", "-d", "wikiqa", "--teacher", "monobert+nonexistent"],
        ["sweep", "-r", "crossjem", "-d", "wikiqa", "--no-write"]
        + ["--set", "teacher=monobert,monobert+nonexistent"],
    ],
)
def test_a_bad_ensemble_member_is_rejected_before_the_first_member_trains(
    env: Path, no_training: None, args: list[str]
) -> None:
    out = flat(invoke(*args, code=2))
    assert "crossjem: teacher 'nonexistent' is neither a ranker nor an existing folder" in out
    assert not (env / "models" / "wikiqa").exists()


def test_latency_into_an_unwritable_results_folder_fails_before_timing(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def timed(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("rankers were timed before the results folder was checked")

    monkeypatch.setattr("bench.latency.benchmark.time_entries", timed)
    _refuse_writes_under(env, monkeypatch)
    out = flat(
        invoke("latency", "-d", "semeval16b", "--rankers", "bm25", "--n-items", "20", code=2)
    )
    assert f"error: the results folder {env / 'latency' / 'semeval16b'} is not writable" in out
    assert "Permission denied" in out


# -- 18. what a sweep writes into the settings file -----------------------------------------------
@pytest.fixture()
def configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A settings folder of its own (rankers/configs is never written by a test)."""
    folder = tmp_path / "configs"
    folder.mkdir()
    monkeypatch.setattr("bench.execution.ranker_settings.CONFIG_DIR", folder)
    return folder


BM25_SWEEP = ("sweep", "-r", "bm25", "-d", "semeval16b", "--set", "k1=0.9,1.5")


def test_sweep_refuses_a_read_only_settings_file_before_any_run(env: Path, configs: Path) -> None:
    path = configs / "bm25.yaml"
    text = "default: {}\ndatasets: {}\n"
    path.write_text(text)
    path.chmod(0o444)
    out = flat(invoke(*BM25_SWEEP, code=2))
    assert f"error: {path} is read-only (mode 0444): make it writable, or sweep with" in out
    assert path.read_text() == text and stat.S_IMODE(path.stat().st_mode) == 0o444
    assert not env.exists() or not list(env.glob("runs/*/*/*"))


def test_sweep_into_a_read_only_settings_folder_fails_before_any_run(
    env: Path, configs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refuse_writes_under(configs, monkeypatch)
    out = flat(invoke(*BM25_SWEEP, code=2))
    assert f"error: the settings folder {configs} is not writable: cannot write" in out
    assert "sweep with --no-write" in out
    assert not list(env.glob("runs/*/*/*"))


def test_sweep_keeps_the_settings_file_mode(env: Path, configs: Path) -> None:
    path = configs / "bm25.yaml"
    path.write_text("default: {}\ndatasets: {}\n")
    path.chmod(0o640)
    invoke("-q", *BM25_SWEEP)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert set(yaml.safe_load(path.read_text())["datasets"]["semeval16b"]) == {"k1"}


def _sweep(rows: dict[str, float], created: str, dev_split: str = "dev") -> Any:
    """A finished monoBERT sweep over ``epochs`` on semeval16b: epochs value -> dev AP@10."""
    from bench.experiments.sweep import Sweep, SweepRow

    command = "bench sweep -r monobert -d semeval16b --set epochs=" + ",".join(rows)
    done = [
        SweepRow({"epochs": e}, dev, {"AP@10": 0.7}, 3, 9.0, "d", "t") for e, dev in rows.items()
    ]
    return Sweep("monobert", "semeval16b", "AP@10", dev_split, "test", command, done, created)


def test_a_narrower_sweep_keeps_an_earlier_better_choice_and_every_table(tmp_path: Path) -> None:
    from bench.experiments.sweep import write_chosen

    path = tmp_path / "monobert.yaml"
    path.write_text(
        "default:\n  epochs: 3\ndatasets:\n  # hand-written note\n  wikiqa: {loss: ce}\n"
    )
    first = write_chosen(_sweep({"3": 0.7475, "10": 0.7825}, "2026-11-23T10:00:00+00:00"), path)
    assert first.settings == {"epochs": 10} and first.kept is None

    narrower = write_chosen(_sweep({"3": 0.7475, "5": 0.7600}, "2026-11-24T10:00:00+00:00"), path)
    assert narrower.settings == {"epochs": 10}
    assert narrower.kept == (
        "not written: the best here, dev AP@10 0.7600, is below the earlier choice epochs=10 "
        "(dev AP@10 0.7825, sweep of 2026-11-23), which stays; --replace writes this sweep's"
    )
    text = path.read_text()
    assert yaml.safe_load(text)["datasets"]["semeval16b"] == {"epochs": 10}
    assert text.count("  # sweep (") == 2 and "  #   " + narrower.kept in text
    assert "# hand-written note" in text
    assert "  # sweep (2026-11-23, dev split dev): bench sweep -r monobert" in text

    # another dev split is not comparable; --replace writes the worse choice; a better one wins
    other = write_chosen(_sweep({"4": 0.70}, "2026-11-24T11:00:00+00:00", "validation"), path)
    assert other.settings == {"epochs": 4} and other.kept is None
    assert write_chosen(_sweep({"3": 0.60}, "2026-11-25T10:00:00+00:00"), path).kept is None
    write_chosen(_sweep({"6": 0.5}, "2026-11-25T11:00:00+00:00"), path, replace=True)
    assert yaml.safe_load(path.read_text())["datasets"]["semeval16b"] == {"epochs": 6}
    better = write_chosen(_sweep({"20": 0.79}, "2026-11-25T12:00:00+00:00"), path)
    assert better.settings == {"epochs": 20} and better.kept is None
    assert path.read_text().count("  # sweep (") == 6


def test_the_repository_settings_comments_are_read_as_earlier_choices(tmp_path: Path) -> None:
    """rankers/configs/monobert.yaml's semeval16b sweep (written before the dev split was
    recorded) chose epochs=10 at dev AP@10 0.7825: a sweep of epochs=3 alone must not undo it."""
    from bench.experiments.sweep import write_chosen

    path = tmp_path / "monobert.yaml"
    shutil.copy(PROJECT_ROOT / "rankers" / "configs" / "monobert.yaml", path)
    written = write_chosen(_sweep({"3": 0.7475}, "2026-11-25T10:00:00+00:00"), path)
    assert written.settings == {"epochs": 10, "patience": 3}
    assert written.kept is not None and "epochs=10, patience=3 (dev AP@10 0.7825" in written.kept


def test_a_sweep_over_a_runtime_option_is_refused_before_it_trains(
    env: Path, no_training: None
) -> None:
    out = flat(
        invoke("sweep", "-r", "monobert", "-d", "wikiqa", "--set", "batch_size=32,64", code=2)
    )
    assert "--set batch_size=32,64: batch_size is a runtime option of monobert" in out
    assert "so a sweep over it has nothing to choose" in out


# -- 19. messages that say what is wrong (commands of many runs) ----------------------------------
def _jsonl(folder: Path, rows: Sequence[dict[str, Any]], split: str = "test") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{split}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_non_utf8_expected_values_file_is_named_with_its_line(env: Path, tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"- {dataset: wikiqa, split: test, ranker: bm25}\n# caf\xe9\n")
    out = flat(invoke("check", "--expected", str(path), code=2))
    assert f"error: {path}:2: not valid UTF-8 (invalid continuation byte); save the file" in out


def test_datasets_listing_of_a_missing_data_folder_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    out = flat(invoke("datasets", "--no-wordpiece", "--data-dir", str(missing), code=2))
    assert f"error: the data folder {missing} does not exist" in out


def test_a_split_without_any_positive_says_why_it_has_nothing_to_rank(
    tmp_path: Path, results_dir: Path
) -> None:
    data = tmp_path / "data"
    rows = [{"query": f"q{i}", "positive": [], "negative": ["a b", "c d"]} for i in range(3)]
    _jsonl(data / "nopos", rows)
    out = flat(invoke("run", "-r", "bm25", "-d", "nopos", "--data-dir", str(data), code=2))
    assert (
        "error: nopos/test has no candidate lists to rank: no query has a positive (a candidate "
        "of grade >= 1), so every query was dropped (3 without a positive candidate)"
    ) in out


def test_a_card_declaring_trec_over_mteb_files_names_both(
    tmp_path: Path, results_dir: Path
) -> None:
    data = tmp_path / "data"
    _jsonl(data / "mixed", [{"query": "q", "positive": ["a"], "negative": ["b"]}])
    card = data / "mixed" / "card.yaml"
    card.write_text("layout: trec\n")
    out = flat(invoke("run", "-r", "bm25", "-d", "mixed", "--data-dir", str(data), code=2))
    assert (
        f"error: dataset 'mixed': {card} declares layout trec, which reads queries.tsv, "
        f"collection.tsv, qrels.txt and run.*.trec, but {data / 'mixed'} holds card.yaml, "
        "test.jsonl; fix the card's layout or the files"
    ) in out


def test_blank_queries_and_candidates_are_counted_and_reported(
    tmp_path: Path, results_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    rows = [
        {"query": "  ", "positive": ["a b"], "negative": ["", "c d"]},
        {"query": "q", "positive": ["a b"], "negative": [" \t", "c d"]},
    ]
    path = _jsonl(data / "blank", rows)
    caplog.set_level(logging.WARNING)
    notes = [
        "empty or whitespace-only query texts, ranked as given: 1",
        "empty or whitespace-only candidate texts, ranked as given: 2",
    ]
    record = run(RunOptions("bm25", "blank", data_dir=data, warmup=0, progress=False))
    assert record.data["notes"] == notes
    assert f"{path}: {notes[0]}" in caplog.text and f"{path}: {notes[1]}" in caplog.text


def test_sweep_into_an_unwritable_sweeps_folder_fails_before_any_run(
    env: Path, configs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refuse_writes_under(env / "sweeps", monkeypatch)
    out = flat(invoke(*BM25_SWEEP, "--no-write", code=2))
    assert f"error: the results folder {env / 'sweeps'} is not writable" in out
    assert not list(env.glob("runs/*/*/*"))


def test_dev_baselines_follow_the_results_root_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dev baselines a training scores go under the results root the model
    is trained under, not under $BENCH_RESULTS_DIR or the checkout's results/."""
    import bench.core.settings

    class Scored(FakeTrainable):
        def fit(self, train: RankingSplit, dev: RankingSplit | None = None) -> dict[str, Any]:
            return {**super().fit(train, dev), "dev_AP@10": [0.5], "best_epoch": 1}

    project = tmp_path / "checkout"
    monkeypatch.setattr(bench.core.settings, "PROJECT_ROOT", project)
    monkeypatch.delenv("BENCH_RESULTS_DIR", raising=False)
    root = tmp_path / "given"
    summary = fit_or_load(Scored(), toy_options(tmp_path, "fake"), root)
    assert set(summary["dev_baselines"]["scores"]) == {"bm25"}
    assert len(list(root.glob("runs/toy/bm25/dev-*/record.json"))) == 1
    assert not project.exists()


def test_a_full_disk_while_writing_an_entry_leaves_no_entry_folder(
    shared_data: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run file written, the per-query file hits a full disk: the error names the file and
    the entry folder the write made is gone (no half entry); a rerun then writes it whole."""
    import bench.results.records
    from bench.core.io import StorageError
    from bench.execution.runner import RunOptions, run
    from bench.results.records import PER_QUERY

    write = bench.results.records.atomic_write_text

    def full(path: Path, text: str, mode: int | None = None) -> None:
        if path.name == PER_QUERY:
            raise StorageError(f"cannot write {path}: No space left on device")
        write(path, text, mode)

    monkeypatch.setattr(bench.results.records, "atomic_write_text", full)
    opts = RunOptions("bm25", "semeval16b", data_dir=shared_data, progress=False)
    with pytest.raises(StorageError, match=f"cannot write .*{PER_QUERY}: No space left"):
        run(opts)
    entries = list((results_dir / "runs" / "semeval16b" / "bm25").iterdir())
    assert [p.suffix for p in entries] == [".lock"]  # the lock file stays, never held
    monkeypatch.setattr(bench.results.records, "atomic_write_text", write)
    assert (run(opts).path / "record.json").exists()
