"""The run pipeline: per-ranker config files, training before ranking, teachers, caching."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from toydata import write_tiny_settings, write_toy_mteb

from bench.execution.fitting import baseline_verdict
from bench.execution.policy import DEV_BASELINES, DEV_BASELINES_ENV, dev_baselines
from bench.execution.ranker_settings import ranker_options
from bench.execution.runner import RunOptions, label_for, run, train
from bench.results.records import supervision
from rankers import RankerError, create_ranker


def _toy_run(tmp_path: Path, ranker: str, **fields: object) -> RunOptions:
    """Options for ``ranker`` on a fresh toy dataset under ``tmp_path``, CPU, no progress bar."""
    write_toy_mteb(tmp_path / "data" / "toy")
    base: dict[str, object] = {"warmup": 1, "progress": False, "device": "cpu"}
    return RunOptions(
        ranker=ranker, dataset="toy", data_dir=tmp_path / "data", **{**base, **fields}
    )


@pytest.fixture()
def configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_bert: Path) -> Path:
    """Config files pointing every encoder ranker at the tiny BERT, one epoch."""
    folder = write_tiny_settings(tmp_path / "configs", tiny_bert, "")
    monkeypatch.setattr("bench.execution.ranker_settings.CONFIG_DIR", folder)
    return folder


def test_ranker_options_merge_default_dataset_and_overrides(configs: Path) -> None:
    opts = ranker_options("crossjem", "toy", {"epochs": "2"})
    assert opts["epochs"] == "2" and opts["max_item_len"] == 8 and opts["teacher"] == "monobert"
    assert "max_item_len" not in ranker_options("crossjem", "other")
    assert ranker_options("bm25", "toy", {"k1": 1.2}) == {"k1": 1.2}  # no file: overrides only


def test_malformed_config_file_is_named(configs: Path) -> None:
    (configs / "monobert.yaml").write_text("defaults: {}\n")
    with pytest.raises(RankerError, match="monobert.yaml"):
        ranker_options("monobert", "toy")


def test_crossjem_trains_its_teacher_then_itself_then_reuses_both(
    configs: Path, tmp_path: Path, results_dir: Path
) -> None:
    opts = _toy_run(tmp_path, "crossjem")
    record = run(opts)
    # no checkpoint -> trained first; the named teacher was trained before it
    assert record.run_config["fit"] is True
    assert record.training is not None and record.training["teacher_key"]
    assert record.training["targets"].startswith("teacher ")
    models = sorted(
        p.parent.parent.name for p in (results_dir / "models" / "toy").glob("*/*/training.json")
    )
    assert models == ["crossjem", "monobert"]
    assert not list((results_dir / "models").rglob("checkpoint"))  # resumable state removed
    assert record.data["queries"] == 4 and set(record.metrics) >= {"AP@10", "RR@10"}
    # everything set comes from the settings file: the label names no option
    assert record.label == f"crossjem ({Path(record.config['model']).name}, fine-tuned)"
    assert record.overrides == {}
    assert str(tmp_path) not in record.label  # paths (checkpoint, teacher folder) stay out

    again = run(opts)
    assert again.path == record.path and again.created == record.created
    # a trained record is current: its model's train and dev data are the data now
    from bench.execution.selection import select_records

    assert select_records([record], opts.data_dir).records == [record]

    # a changed teacher setting makes a new teacher and a new student
    (configs / "monobert.yaml").write_text(
        (configs / "monobert.yaml").read_text().replace("epochs: 1", "epochs: 2")
    )
    changed = run(opts)
    assert changed.path != record.path
    assert changed.training["teacher_key"] != record.training["teacher_key"]


def test_colbert_on_a_bare_bert_is_trained_before_it_ranks(
    tmp_path: Path, results_dir: Path, tiny_bert: Path
) -> None:
    options = {"model": str(tiny_bert), "doc_maxlen": 16, "train_batch_size": 4, "epochs": 1}
    opts = _toy_run(tmp_path, "colbert", options=options)
    record = run(opts)
    assert record.run_config["fit"] is True and record.training is not None
    assert record.training["triples_per_epoch"] == 8 and record.training["steps"] == 2
    assert "fine-tuned" in record.label
    assert len(list((results_dir / "models" / "toy" / "colbert").glob("*/training.json"))) == 1
    assert run(opts).path == record.path  # the trained model and the run are reused


def test_trained_checkpoint_skips_training(
    configs: Path, tmp_path: Path, results_dir: Path
) -> None:
    base = _toy_run(tmp_path, "monobert", warmup=0)
    trained = run(base)
    model_dir = trained.training["model_dir"]
    reuse = run(RunOptions(**{**base.__dict__, "options": {"checkpoint": model_dir}}))
    assert reuse.run_config["fit"] is False and reuse.training is None
    assert reuse.metrics == trained.metrics


def test_label_names_what_differs_from_the_settings_file_for_the_dataset() -> None:
    """A default run's label names no option (the settings file's ``min_steps``
    and ``patience`` and wikiqa's ``loss: ce`` are its defaults); an option set on top is named,
    as is one that differs from the file for that dataset."""
    options = ranker_options("monobert", "wikiqa")
    default = create_ranker("monobert", options)
    assert label_for(default, fitted=True, dataset="wikiqa") == "monobert (minilm-l6, fine-tuned)"
    tuned = create_ranker("monobert", {**options, "patience": 1})
    assert label_for(tuned, fitted=True, dataset="wikiqa") == (
        "monobert (minilm-l6, patience=1, fine-tuned)"
    )
    # wikiqa's settings on semeval16b differ from semeval16b's (epochs 10, loss bce)
    assert label_for(default, fitted=True, dataset="semeval16b") == (
        "monobert (minilm-l6, epochs=3, loss=ce, fine-tuned)"
    )


def test_label_names_what_differs_from_defaults() -> None:
    ranker = create_ranker("bm25", {"k1": "1.2"})
    assert label_for(ranker, fitted=False) == "bm25 (k1=1.2)"
    assert label_for(create_ranker("bm25"), fitted=False, subset=50) == "bm25 (first 50 queries)"
    student = create_ranker("monobert", {"teacher": "/data/models/mono/ab12+colbert"})
    assert label_for(student, fitted=True, train_subset=78) == (
        "monobert (minilm-l6, teacher=ab12+colbert, fine-tuned, trained on the first 78 queries)"
    )


def test_training_compares_the_kept_epoch_with_dev_baselines(
    configs: Path, tmp_path: Path, results_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    record = run(_toy_run(tmp_path, "monobert", warmup=0))
    baselines = record.training["dev_baselines"]
    bm25_dev = run(_toy_run(tmp_path / "again", "bm25", split="dev", warmup=0))
    assert baselines["scores"] == {"bm25": bm25_dev.metrics["AP@10"]}
    kept = record.training["dev_AP@10"][record.training["best_epoch"] - 1]
    assert baselines["kept"] == kept
    assert baselines["below"] == (["bm25"] if kept < bm25_dev.metrics["AP@10"] else [])
    said = any("below bm25" in r.getMessage() for r in caplog.records)
    assert said == bool(baselines["below"])
    assert set(baselines["p_values"]) == {"bm25"} and 0.0 <= baselines["p_values"]["bm25"] <= 1.0
    unclear = baselines["not_significantly_above"]
    assert unclear == (
        ["bm25"]
        if kept >= bm25_dev.metrics["AP@10"] and baselines["p_values"]["bm25"] >= 0.05
        else []
    )
    assert any("not significantly" in r.getMessage() for r in caplog.records) == bool(unclear)


def test_the_environment_names_the_dev_baselines(monkeypatch: pytest.MonkeyPatch) -> None:
    """``$BENCH_DEV_BASELINES`` replaces the policy's baselines (the suite sets ``bm25``, see
    conftest.py): names as the CLI takes them, empty for none; an unknown one is an error
    naming the variable and its value."""
    monkeypatch.delenv(DEV_BASELINES_ENV)
    assert dev_baselines() == DEV_BASELINES == ("bm25", "dpr")
    monkeypatch.setenv(DEV_BASELINES_ENV, " BM25 , dpr,bm25")
    assert dev_baselines() == ("bm25", "dpr")
    monkeypatch.setenv(DEV_BASELINES_ENV, "")
    assert dev_baselines() == ()
    monkeypatch.setenv(DEV_BASELINES_ENV, "bm25,bm52")
    with pytest.raises(
        ValueError, match=r"^\$BENCH_DEV_BASELINES='bm25,bm52': unknown ranker 'bm52'"
    ):
        dev_baselines()


def test_a_dev_lead_the_queries_cannot_tell_from_noise_is_not_a_lead() -> None:
    """Hand-computed: own - c = (-0.4, 0.4, 0.1), t = (1/30) / (7/30) = 1/7 on 2 degrees of
    freedom, two-sided p = 1 - t / sqrt(t^2 + 2) = 1 - 1/sqrt(99); a constant shift gives p = 0."""
    own = {"q1": 0.5, "q2": 0.7, "q3": 0.9}
    verdict = baseline_verdict(
        0.7,
        own,
        {
            "a": (0.8, {"q1": 0.6, "q2": 0.8, "q3": 1.0}),
            "b": (0.6, {"q1": 0.4, "q2": 0.6, "q3": 0.8}),
            "c": (2 / 3, {"q1": 0.9, "q2": 0.3, "q3": 0.8}),
        },
    )
    assert verdict["below"] == ["a"]
    assert verdict["not_significantly_above"] == ["c"]
    assert verdict["p_values"]["b"] == 0.0
    assert verdict["p_values"]["c"] == pytest.approx(1 - 1 / 99**0.5)
    assert verdict["scores"] == {"a": 0.8, "b": 0.6, "c": 2 / 3} and verdict["alpha"] == 0.05


def _oracle_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dev baselines of every training: one job, "oracle", whose record scores AP@10 1.0
    (it ranks the positives first: no student beats it), planned in place of bm25 and dpr."""
    from bench.execution import runner
    from bench.execution.plan import BASELINE, Job

    class Perfect:
        metrics = {"AP@10": 1.0}

        def per_query(self) -> dict[str, dict[str, float]]:
            return {}

    def plan(
        name: str, opts: RunOptions, dev: object, plan: runner.Plan, ctx: object
    ) -> dict[str, str]:
        plan.add(Job(id="oracle", kind=BASELINE, what="oracle", key="-", run=lambda _: Perfect()))
        return {"oracle": "oracle"}

    monkeypatch.setattr(runner, "_plan_baselines", plan)


def test_a_student_below_a_baseline_is_told(
    configs: Path,
    tmp_path: Path,
    results_dir: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model whose kept dev score is below a baseline's gets the warning and the record says so
    (the baseline here is a ranker that scores the positives first: no student beats it)."""
    _oracle_baseline(monkeypatch)
    record = run(_toy_run(tmp_path, "monobert", warmup=0, options={"lr": 1e-9}))
    baselines = record.training["dev_baselines"]
    assert baselines["below"] == ["oracle"] and baselines["scores"] == {"oracle": 1.0}
    assert any("below oracle (1.0000)" in r.getMessage() for r in caplog.records)


def test_advice_names_patience_when_patience_stopped_the_run(
    configs: Path,
    tmp_path: Path,
    results_dir: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model below a baseline whose training patience stopped is told so,
    with the step, and not to raise min_steps (which changes nothing then)."""
    _oracle_baseline(monkeypatch)
    options = {"lr": 1e-9, "epochs": 4, "patience": 1}
    record = run(_toy_run(tmp_path, "monobert", warmup=0, options=options))
    training = record.training
    assert training["stopped_early"] and training["steps"] < training["steps_planned"]
    (warning,) = [r.getMessage() for r in caplog.records if "below oracle" in r.getMessage()]
    assert (
        f"patience stopped training at step {training['steps']} of {training['steps_planned']} "
        f"(no better dev AP@10 for 1 epoch after epoch {training['best_epoch']}), so more steps "
        "(min_steps) would change nothing; more train queries, a larger patience (--set "
        "patience=N) or another learning rate may help"
    ) in warning
    assert "--set min_steps" not in warning


def test_monobert_distils_from_its_own_kind_and_ensembles_resolve_each_member(
    configs: Path, tmp_path: Path, results_dir: Path, tiny_bert: Path
) -> None:
    """Same supervision for both architectures: monoBERT distilled from a monoBERT teacher
    (trained on labels with the settings file); a teacher ensemble trains each member."""
    opts = _toy_run(tmp_path, "monobert", options={"teacher": "monobert", "loss": "listnet"})
    record = run(opts)
    assert record.training["teacher"]["name"] == "monobert"
    assert record.training["targets"].startswith("teacher ")
    assert len(list((results_dir / "models" / "toy" / "monobert").glob("*/training.json"))) == 2

    (configs / "colbert.yaml").write_text(
        f"default:\n  model: {tiny_bert}\n  epochs: 1\n  doc_maxlen: 16\n"
        "  train_batch_size: 4\ndatasets: {}\n"
    )
    options = {"teacher": "monobert+colbert", "teacher_scores": "logits"}
    student = run(_toy_run(tmp_path / "ens", "crossjem", options=options))
    teacher = student.training["teacher"]
    assert teacher["name"] == "monobert+colbert" and teacher["scores"] == "logits"
    assert [m["name"] for m in teacher["members"]] == ["monobert", "colbert"]
    assert student.training["teacher_key"].count("+") == 1
    assert supervision(student.training) == "teacher monobert+colbert (logits), listnet"


def test_a_teacher_that_names_itself_is_refused(
    configs: Path, tmp_path: Path, results_dir: Path
) -> None:
    (configs / "monobert.yaml").write_text(
        (configs / "monobert.yaml")
        .read_text()
        .replace("loss: bce", "loss: listnet\n  teacher: monobert")
    )
    with pytest.raises(RankerError, match="names itself"):
        run(_toy_run(tmp_path, "crossjem", options={"teacher": "monobert"}))


def test_the_run_context_is_resolved_once_and_used_by_the_run(tmp_path: Path) -> None:
    opts = _toy_run(tmp_path, "bm25", threads=1, results_dir=tmp_path / "asked")
    ctx = opts.context()
    assert (ctx.device, ctx.threads) == ("cpu", 1)
    assert (ctx.data_root, ctx.results_root) == (tmp_path / "data", tmp_path / "asked")
    # the runner takes the context it is given (here another results root) over its own
    elsewhere = dataclasses.replace(ctx, results_root=tmp_path / "given")
    record = run(opts, elsewhere)
    assert record.path is not None and (tmp_path / "given") in record.path.parents
    assert record.run_config["device"] == "cpu" and not (tmp_path / "asked").exists()
    with pytest.raises(ValueError, match="--device"):
        dataclasses.replace(opts, device="tpu").context()


def test_train_refuses_a_ranker_that_cannot_train(tmp_path: Path) -> None:
    with pytest.raises(RankerError, match="not trainable, so `bench train` has nothing to do"):
        train(_toy_run(tmp_path, "bm25"))


def test_a_dataset_is_resolved_once_per_command(
    tmp_path: Path, configs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run context resolves a dataset (root, card, splits on disk) on first use and hands
    the same one to every later step: a fine-tuned run (training on train and dev, its dev
    baseline, scoring on test) resolves it once, all in the context it is given, and a reader
    asking for several splits' fingerprints resolves it once too."""
    from bench.data.splits import Dataset
    from bench.execution.selection import CurrentInputs

    real = Dataset.resolve.__func__  # type: ignore[attr-defined]
    calls: list[str] = []

    def counting(cls: type[Dataset], name: str, data_dir: object = None) -> Dataset:
        calls.append(name)
        return real(cls, name, data_dir)

    monkeypatch.setattr(Dataset, "resolve", classmethod(counting))
    opts = _toy_run(tmp_path, "monobert", subset=2, results_dir=tmp_path / "asked")
    ctx = dataclasses.replace(opts.context(), results_root=tmp_path / "given")
    assert ctx.dataset("toy") is ctx.dataset("toy")
    assert calls == ["toy"]
    record = run(opts, ctx)
    assert record.training is not None  # it trained, then scored
    assert calls == ["toy"]
    # every job of the command ran in its context: the dev baseline too
    assert (tmp_path / "given" / "runs" / "toy" / "bm25").is_dir()
    assert not (tmp_path / "asked").exists()
    inputs = CurrentInputs(tmp_path / "data")
    assert inputs.data("toy", "test") and inputs.data("toy", "dev")
    assert inputs.training_data("toy")
    assert inputs.dataset("toy") is inputs.dataset("toy")
    assert calls == ["toy", "toy"]
