"""A command is a plan of jobs, then one executor loop: ``--plan`` lists the
jobs, their keys, cached or to compute and why, and does no work."""

from __future__ import annotations

from pathlib import Path

import pytest
from toydata import write_toy_mteb
from typer.testing import CliRunner

from bench.cli.main import app
from bench.core.provenance import CodeScope, import_closure
from bench.execution.plan import CACHED, NOT_NEEDED, TO_COMPUTE, Executor, Job, Plan

cli = CliRunner()


def bench(*args: str) -> str:
    result = cli.invoke(app, ["-q", *args])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return " ".join(result.output.split())


@pytest.fixture()
def toy(tmp_path: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_toy_mteb(tmp_path / "data" / "toy")
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    return results_dir


@pytest.fixture()
def configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_bert: Path) -> Path:
    folder = tmp_path / "configs"
    folder.mkdir()
    for name, extra in (("monobert", "loss: bce"), ("crossjem", "teacher: monobert")):
        (folder / f"{name}.yaml").write_text(
            f"default:\n  model: {tiny_bert}\n  epochs: 1\n  min_steps: 0\n  {extra}\n"
        )
    monkeypatch.setattr("bench.execution.ranker_settings.CONFIG_DIR", folder)
    return folder


def _rows(out: str) -> list[str]:
    return [line for line in out.split("│") if line.strip()]


def test_run_plan_lists_the_jobs_then_after_the_run_lists_them_cached(toy: Path) -> None:
    out = bench("run", "-r", "bm25", "-d", "toy", "--plan")
    assert "score bm25 on toy/test" in out.replace("│", "").replace("  ", " ")
    assert "2 to compute; nothing was run" in out and "no entry with this config yet" in out
    assert not list((toy / "runs").rglob("record.json"))  # no work done
    bench("run", "-r", "bm25", "-d", "toy")
    out = bench("run", "-r", "bm25", "-d", "toy", "--plan")
    assert "to compute" not in out and "2 cached; nothing was run" in out


def test_a_student_plan_lists_teacher_dev_baseline_training_and_scoring(
    toy: Path, configs: Path
) -> None:
    out = bench("run", "-r", "crossjem", "-d", "toy", "--plan")
    flat = out.replace("│", " ")
    for job in (
        "dev baseline bm25 on toy/dev",
        "teacher monobert on toy/train",
        "train crossjem on toy/train",
        "score crossjem on toy/test",
    ):
        assert job in " ".join(flat.split()), job
    # the dev baseline's score and evaluate jobs, the teacher, the training, score, evaluate
    assert "6 to compute; nothing was run" in out
    assert not (toy / "models").exists() or not list((toy / "models").rglob("training.json"))


def test_a_plan_needs_only_what_a_job_to_compute_reads() -> None:
    """A cached run needs no model; a model to train needs its teacher and baselines."""
    ran: list[str] = []

    def job(name: str, cached: bool, *deps: str) -> Job:
        def run(inputs: object) -> str:
            # like the real jobs: a job reads its inputs only when it computes
            for dep in plan.jobs[name].deps if not plan.jobs[name].cached else ():
                assert callable(inputs)
                inputs(dep)
            ran.append(name)
            return name

        return Job(id=name, kind="k", what=name, key=name, run=run, deps=deps, cached=cached)

    plan = Plan()
    plan.add(job("teacher", True))
    plan.add(job("train", False, "teacher"))
    plan.add(job("score", True, "train"))
    plan.target(plan.add(job("evaluate", False, "score")))
    status = {row["what"]: row["status"] for row in plan.rows()}
    assert status == {
        "teacher": CACHED,
        "train": NOT_NEEDED,
        "score": CACHED,
        "evaluate": TO_COMPUTE,
    }
    assert Executor(plan).execute() == ["evaluate"]
    assert ran == ["score", "evaluate"]

    plan.jobs["score"].cached = False  # the run is not cached: the model is needed
    ran.clear()
    assert Executor(plan).execute() == ["evaluate"]
    assert ran == ["teacher", "train", "score", "evaluate"]
    # a job run on demand (a dev baseline) runs only when a job asks for it
    plan.add(job("baseline", False))
    plan.jobs["baseline"].on_demand = True
    plan.jobs["train"].deps = ("teacher", "baseline")
    ran.clear()
    Executor(plan).execute()
    assert ran == ["teacher", "baseline", "train", "score", "evaluate"]
    plan.jobs["train"].deps = ("teacher",)
    ran.clear()
    Executor(plan).execute()
    assert "baseline" not in ran
    with pytest.raises(ValueError, match="not yet planned"):
        Plan().add(job("x", False, "missing"))


def test_no_job_imports_the_runner() -> None:
    """The jobs (and the executor) never call back into bench.execution.runner: no recursion."""
    files = import_closure(
        CodeScope(("bench.execution.scoring", "bench.execution.fitting", "bench.execution.plan"))
    )
    assert "bench/execution/runner.py" not in files and "bench/cli/main.py" not in files


def test_sweep_and_ablate_plans_do_no_work(toy: Path, configs: Path) -> None:
    out = bench("sweep", "-r", "bm25", "-d", "toy", "--set", "k1=0.9,1.2", "--plan")
    # two combinations, each ranked on test and dev: four score and four evaluate jobs
    assert "8 to compute; nothing was run" in out
    out = bench("ablate", "-d", "toy", "--what", "item-order", "--plan")
    assert "train monobert on toy/train" in " ".join(out.replace("│", " ").split())
    assert not list(toy.rglob("record.json")) and not list(toy.rglob("training.json"))


def test_teachers_that_form_a_cycle_are_refused_before_any_work(
    toy: Path, configs: Path, tiny_bert: Path
) -> None:
    """crossjem's teacher is monobert, whose settings file names crossjem: the plan says so."""
    (configs / "monobert.yaml").write_text(
        f"default:\n  model: {tiny_bert}\n  epochs: 1\n  teacher: crossjem\n"
    )
    result = cli.invoke(app, ["-q", "run", "-r", "crossjem", "-d", "toy", "--plan"])
    assert result.exit_code == 2, result.output
    assert "teachers form a cycle (monobert -> crossjem -> monobert)" in " ".join(
        result.output.split()
    )


@pytest.mark.parametrize(
    "command",
    [
        ("run", "-r", "crossjem", "-d", "toy", "--plan"),
        ("train", "-r", "monobert", "-d", "toy", "--plan"),
        ("ablate", "-d", "toy", "--what", "order", "--plan"),
        ("sweep", "-r", "monobert", "-d", "toy", "--set", "lr=1e-4,2e-4", "--plan"),
    ],
)
def test_a_plan_writes_nothing(toy: Path, configs: Path, command: tuple[str, ...]) -> None:
    bench(*command)
    assert not toy.exists()  # not even an empty runs/ or models/


def test_a_command_that_fails_while_planning_writes_nothing(toy: Path) -> None:
    result = cli.invoke(app, ["-q", "run", "-r", "bm25", "-d", "nosuch"])
    assert result.exit_code == 2 and "unknown dataset 'nosuch'" in result.output
    result = cli.invoke(app, ["-q", "run", "-r", "crossjem", "-d", "toy", "--teacher", "nosuch"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert isinstance(result.exception, SystemExit)  # a clean exit, not a traceback
    assert "error: crossjem: teacher 'nosuch' is neither a ranker nor an existing folder" in said
    assert said.count("error:") == 1 and "Traceback" not in said
    assert "unknown ranker 'nosuch'; known: ance, bm25" in said
    assert not toy.exists()


def test_an_unwritable_results_folder_is_named_by_the_plan_and_stops_the_run(
    toy: Path,
) -> None:
    toy.parent.mkdir(parents=True, exist_ok=True)
    toy.write_text("a file where the results folder should be\n")
    out = bench("run", "-r", "bm25", "-d", "toy", "--plan")  # the plan still prints
    assert f"would stop before the first job: the results folder {toy / 'runs'}" in out
    result = cli.invoke(app, ["-q", "run", "-r", "bm25", "-d", "toy"])
    assert result.exit_code == 2
    assert f"the results folder {toy / 'runs'} is not writable" in result.output


@pytest.mark.parametrize(
    ("ranker", "option", "said"),
    [
        # an option that does nothing in the layout: refused by its declared rule
        (
            "crossjem",
            "share_min=3",
            "option share_min=3 has no effect under order=union (share_min=3 needs order=hybrid)",
        ),
        # the tiny BERT has 2 layers: its config is read without loading the weights
        (
            "crossjem",
            "merge_layers=2",
            "option merge_layers=2 must be below the encoder's 2 layers",
        ),
        # a runtime-only option under torch, a teacher option without a teacher
        (
            "crossjem",
            "onnx_graph=plain",
            "option onnx_graph=plain has no effect under runtime=torch (onnx_graph=plain needs "
            "runtime=onnxruntime)",
        ),
        (
            "monobert",
            "teacher_scores=logits",
            "option teacher_scores=logits has no effect under teacher=None "
            "(teacher_scores=logits needs a value of teacher)",
        ),
    ],
)
def test_a_setting_the_layout_or_model_cannot_take_stops_the_plan_and_the_run(
    toy: Path, configs: Path, ranker: str, option: str, said: str
) -> None:
    """Refused while planning, so `--plan` and the run agree and nothing is trained first
    (the teacher, monoBERT, would otherwise train before the student's encoder loads)."""
    for extra in (["--plan"], []):
        result = cli.invoke(app, ["-q", "run", "-r", ranker, "-d", "toy", "--set", option, *extra])
        text = " ".join(result.output.split())
        assert result.exit_code == 2, text
        assert said in text and "Traceback" not in text
    assert not toy.exists()  # no teacher trained, nothing written
