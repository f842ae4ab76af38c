"""Cache keys follow the code a result depends on: an edit recomputes what
imports the edited file and nothing else, and new measures are computed from the stored run.

The code the keys read is a copy of ``bench/`` and ``rankers/`` in ``tmp_path``
(``provenance.package_folder`` points there), so the tests edit the copy, never the checkout.
"""

from __future__ import annotations

import ast
import logging
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from toydata import write_tiny_settings, write_toy_mteb

from bench.core import provenance
from bench.execution.runner import RunOptions, run
from bench.execution.selection import select_records
from bench.results.metrics import DEFAULT_MEASURES
from bench.results.records import RUN_FILE

Edit = Callable[[str], None]


def _toy(tmp_path: Path, ranker: str, **fields: object) -> RunOptions:
    data = tmp_path / "data"
    if not (data / "toy").exists():
        write_toy_mteb(data / "toy")
    base: dict[str, object] = {"warmup": 1, "progress": False, "device": "cpu"}
    return RunOptions(ranker=ranker, dataset="toy", data_dir=data, **{**base, **fields})


@pytest.fixture()
def edit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Edit:
    """``edit("bench/reporting/plot.py")`` appends a comment line to that file of a copy of the code
    the cache keys read; any per-process cache of the code is dropped, as a new process would."""
    real = provenance.package_folder
    copies = {name: tmp_path / "code" / name for name in provenance.CODE_PACKAGES}
    for name, copy in copies.items():
        shutil.copytree(real(name), copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(provenance, "package_folder", lambda n: copies.get(n) or real(n))

    def apply(path: str) -> None:
        top, rest = path.split("/", 1)
        source = copies[top] / rest
        assert source.is_file(), source
        source.write_text(source.read_text() + "\n# edited by a test\n")
        for value in list(vars(provenance).values()):
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()

    return apply


@pytest.fixture()
def configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_bert: Path) -> Path:
    """Settings files: monoBERT on labels, CROSS-JEM distilled from monoBERT, tiny BERT."""
    folder = write_tiny_settings(tmp_path / "configs", tiny_bert, "min_steps: 0\n  ")
    monkeypatch.setattr("bench.execution.ranker_settings.CONFIG_DIR", folder)
    return folder


def _entries(root: Path, kind: str, ranker: str) -> list[str]:
    """The cache entries (trained models or runs) of ``ranker`` on the toy data."""
    folder = root / kind / "toy" / ranker
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if re.fullmatch(r"(\w+-)?[0-9a-f]{12}", p.name))


def test_editing_the_plot_module_reuses_a_cached_bm25_run(
    tmp_path: Path, results_dir: Path, edit: Edit
) -> None:
    opts = _toy(tmp_path, "bm25")
    first = run(opts)
    for path in (
        "bench/reporting/plot.py",
        "bench/cli/main.py",
        "bench/reporting/tables.py",
        "rankers/families/monobert.py",
    ):
        edit(path)
    again = run(opts)
    assert again.path == first.path and again.created == first.created
    # the readers agree: the record is current
    assert select_records([first], opts.data_dir).records == [first]


def test_editing_bm25_recomputes_bm25_but_reuses_dpr(
    tmp_path: Path, results_dir: Path, edit: Edit, caplog: pytest.LogCaptureFixture
) -> None:
    bm25, dpr = _toy(tmp_path, "bm25"), _toy(tmp_path, "dpr")
    first_bm25, first_dpr = run(bm25), run(dpr)
    edit("rankers/families/bm25.py")
    caplog.set_level(logging.INFO)
    second_bm25, second_dpr = run(bm25), run(dpr)
    assert second_bm25.path != first_bm25.path
    assert second_bm25.key_parts["config"] == first_bm25.key_parts["config"]
    assert f"code changed since {first_bm25.path} (rankers/families/bm25.py changed)" in caplog.text
    assert second_dpr.path == first_dpr.path and second_dpr.created == first_dpr.created
    kept = select_records([first_bm25, first_dpr], bm25.data_dir)
    assert kept.records == [first_dpr] and kept.summary() is not None


@pytest.mark.slow
def test_editing_monobert_retrains_it_and_the_student_distilled_from_it(
    tmp_path: Path, results_dir: Path, configs: Path, edit: Edit
) -> None:
    """A tiny teacher -> student setup: CROSS-JEM distilled from monoBERT. Editing
    rankers/families/monobert.py retrains monoBERT and CROSS-JEM (whose key holds its teacher's) and
    ranks again; the dev baseline (BM25) is reused."""
    opts = _toy(tmp_path, "crossjem")
    first = run(opts)
    assert _entries(results_dir, "models", "monobert") and _entries(
        results_dir, "models", "crossjem"
    )
    baselines = _entries(results_dir, "runs", "bm25")
    assert len(baselines) == 1  # the dev baseline of both trainings, scored once
    edit("rankers/families/monobert.py")
    second = run(opts)
    assert second.path != first.path
    assert len(_entries(results_dir, "models", "monobert")) == 2
    assert len(_entries(results_dir, "models", "crossjem")) == 2
    assert second.training is not None and first.training is not None
    assert second.training["teacher_key"] != first.training["teacher_key"]
    # CROSS-JEM's own code did not change: only its teacher did
    assert second.training["key_parts"]["code"] == first.training["key_parts"]["code"]
    assert _entries(results_dir, "runs", "bm25") == baselines
    # the readers agree: the student's first record is of other code (its teacher's)
    assert select_records([first, second], opts.data_dir).records == [second]


def test_a_new_measure_is_reported_for_a_cached_run_without_rescoring(
    tmp_path: Path,
    results_dir: Path,
    edit: Edit,
    caplog: pytest.LogCaptureFixture,
) -> None:
    opts = _toy(tmp_path, "bm25")
    first = run(opts)
    assert first.path is not None
    scores = (first.path / RUN_FILE).read_bytes()
    # a measure added to bench/results/metrics.py: its source changes, and runs ask for it
    edit("bench/results/metrics.py")
    measures = (*DEFAULT_MEASURES, "nDCG@5")
    # until it is evaluated again, its metrics are those of other code: readers leave it out
    assert select_records([first], opts.data_dir).left_out == {"other code": [first]}

    caplog.set_level(logging.INFO)
    again = run(_toy(tmp_path, "bm25", measures=measures))
    assert again.path == first.path
    assert set(again.metrics) == set(measures)
    assert {k: again.metrics[k] for k in first.metrics} == first.metrics
    assert 0.0 < again.metrics["nDCG@5"] <= 1.0
    # not scored again: the same run file, the same timings, the same creation time
    assert (first.path / RUN_FILE).read_bytes() == scores
    assert again.latency == first.latency and again.created == first.created
    assert "evaluating" in caplog.text and "again from its run file" in caplog.text
    assert set(next(iter(again.per_query().values()))) == set(measures)
    assert select_records([again], opts.data_dir).records == [again]


def test_rankers_import_training_only_modules_inside_functions() -> None:
    """What :data:`bench.execution.keys.TRAINING_ONLY_PACKAGE` promises: no ranker module outside
    it imports it at module level, so scoring a ranker never runs it."""
    from bench.execution.keys import training_only

    folder = provenance.package_folder("rankers")
    for path in sorted(folder.rglob("*.py")):
        package = ".".join(("rankers", *path.relative_to(folder).parent.parts))
        if training_only(package):
            continue
        for module in module_level_imports(path.read_text(), package):
            assert not training_only(module), f"{path} imports {module} at module level"


def module_level_imports(source: str, package: str) -> set[str]:
    """Every module a source imports when it is imported (module level, inside ``if`` and
    ``try`` blocks too, but not under ``if TYPE_CHECKING:``), as full dotted names: ``from
    rankers.fit import lists`` gives ``rankers.fit`` and ``rankers.fit.lists``; relative imports are
    resolved against ``package``."""
    out: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parent = ".".join(parts[: len(parts) - node.level + 1])
                    base = f"{parent}.{base}" if base else parent
                out.add(base)
                out.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody):
                    visit(block)
                for handler in node.handlers:
                    visit(handler.body)

    visit(ast.parse(source).body)
    return out


@pytest.mark.parametrize(
    "source",
    [
        "from rankers.fit.loop import train_loop\n",
        "from rankers.fit import lists\n",
        "import rankers.fit.loop\n",
        "from .fit import lists\n",
        "try:\n    from rankers.fit.lists import fit_lists\nexcept ImportError:\n    pass\n",
        "if True:\n    import rankers.fit.loop as t\n",
    ],
)
def test_every_way_of_importing_a_training_module_is_seen(source: str) -> None:
    from bench.execution.keys import training_only

    assert any(training_only(m) for m in module_level_imports(source, "rankers"))


def test_imports_for_type_checking_or_inside_functions_are_not_module_level() -> None:
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rankers.fit import lists\n"
        "def f():\n    import rankers.fit.loop\n"
    )
    assert module_level_imports(source, "rankers") == {"typing", "typing.TYPE_CHECKING"}


def test_the_scoring_closure_leaves_out_the_cli_plots_measures_and_other_rankers() -> None:
    from bench.execution.keys import scoring_code, training_code

    files = scoring_code("rankers.families.dense", Path("rankers/configs/dpr.yaml"))["files"]
    assert {
        "rankers/families/dense.py",
        "bench/execution/scoring.py",
        "bench/results/ranking.py",
    } <= set(files)
    for absent in (
        "bench/cli/main.py",
        "bench/reporting/plot.py",
        "bench/reporting/tables.py",
        "bench/execution/runner.py",
    ):
        assert absent not in files
    assert "bench/results/metrics.py" not in files and "rankers/inputs/lexical.py" not in files
    assert "rankers/families/monobert.py" not in files
    trained = training_code("rankers.families.dense", Path("rankers/configs/dpr.yaml"))["files"]
    # DPR mines its negatives with BM25 while it trains, and dev selects with the measures
    assert {
        "rankers/inputs/lexical.py",
        "bench/results/metrics.py",
        "bench/execution/fitting.py",
    } <= set(trained)


def test_the_training_key_names_cuda_autocast_and_only_it() -> None:
    """The device is not in a trained model's key, but CUDA autocast changes the weights:
    ``train_dtype`` auto trains float32 on CPU and bf16 autocast on a GPU that has it, so the
    key says so where it applies (and a CPU key is as it was)."""
    from types import SimpleNamespace

    from bench.execution.keys import autocast_part as _autocast_part

    def part(device: str, train_dtype: str) -> dict[str, str]:
        ranker = SimpleNamespace(device=device, config=SimpleNamespace(train_dtype=train_dtype))
        return _autocast_part(ranker)  # type: ignore[arg-type]

    assert part("cpu", "bfloat16") == {} and part("cpu", "auto") == {}
    assert part("cuda:0", "float32") == {}
    assert part("cuda:0", "bfloat16") == {"autocast": "bf16"}
    assert part("cuda:1", "float16") == {"autocast": "fp16"}
    assert _autocast_part(SimpleNamespace(device="cuda", config=SimpleNamespace())) == {}  # type: ignore[arg-type]


def test_editing_the_encoder_base_rekeys_only_the_rankers_built_on_it() -> None:
    """The encoder ranker base (``rankers/families/encoder.py``) is in the scoring and training
    closures of the rankers built on it (monoBERT, CROSS-JEM and the Set-Encoder) and of no
    other: DPR, ANCE, ColBERT and RankT5 use the batching helpers
    (``rankers/inputs/batching.py``) and keep their cached runs and models when the base
    changes."""
    import rankers
    from bench.execution.keys import scoring_code, training_code
    from bench.execution.ranker_settings import settings_file

    base = "rankers/families/encoder.py"
    with_base: dict[str, bool] = {}
    for name in rankers.available():
        module = rankers.module_of(name)
        settings = settings_file(name)
        scored = base in scoring_code(module, settings)["files"]
        trained = base in training_code(module, settings)["files"]
        assert scored == trained, name
        with_base[name] = scored
    assert {name for name, has in with_base.items() if has} == {
        "monobert",
        "crossjem",
        "set-encoder",
    }
    assert not with_base["dpr"] and not with_base["colbert"] and not with_base["rankt5"]


#: the packages that only read results (tables, the paper's numbers, the documents' figures,
#: plots, the command line, the latency benchmark and experiments that drive runs)
READERS = ("bench/reporting/", "bench/cli/", "bench/latency/", "bench/experiments/")


def test_no_key_covers_the_code_that_only_reads_or_drives_results() -> None:
    """Editing a table, the paper's numbers, a rendered figure or the CLI recomputes nothing:
    no ranker's scoring or training key covers a file of those packages, nor the runner that
    plans the jobs."""
    import rankers
    from bench.execution.keys import scoring_code, training_code
    from bench.execution.ranker_settings import settings_file

    covered = {}
    for name in rankers.available():
        module, settings = rankers.module_of(name), settings_file(name)
        for job, code in (("score", scoring_code), ("train", training_code)):
            files = code(module, settings)["files"]
            covered[name, job] = sorted(
                f for f in files if f.startswith(READERS) or f == "bench/execution/runner.py"
            )
    assert covered == {k: [] for k in covered}


@pytest.mark.parametrize(
    ("name", "steps"),
    [
        ("dpr", "rankers/fit/dense.py"),
        ("ance", "rankers/fit/dense.py"),
        ("colbert", "rankers/fit/colbert.py"),
    ],
)
def test_a_trainers_steps_key_its_training_only(name: str, steps: str) -> None:
    """DPR's, ANCE's and ColBERT's training steps (pairs, mining, triples, the loss) live in the
    training-only package: editing them re-keys their trained models but neither their zero-shot
    runs nor another ranker's training."""
    import rankers
    from bench.execution.keys import scoring_code, training_code
    from bench.execution.ranker_settings import settings_file

    module, settings = rankers.module_of(name), settings_file(name)
    assert steps in training_code(module, settings)["files"]
    assert steps not in scoring_code(module, settings)["files"]
    for other in ("monobert", "rankt5", "dpr" if name == "colbert" else "colbert"):
        trained = training_code(rankers.module_of(other), settings_file(other))["files"]
        assert steps not in trained, other


def test_no_ranker_is_its_own_training_steps() -> None:
    """One way into the training loop: every in-tree trainable ranker hands ``train_loop`` a steps
    object (``ListSteps``, ``DenseSteps``, ``ColBERTSteps``), so no ranker class carries the
    :class:`~rankers.fit.loop.Trainable` hooks or their training-only state."""
    import rankers

    hooks = ("training_module", "epoch_batches", "batch_loss", "on_epoch_start", "training_state")
    carried = {
        name: [h for h in hooks if hasattr(rankers.get_ranker_class(name), h)]
        for name in rankers.available()
    }
    assert {name: found for name, found in carried.items() if found} == {}
