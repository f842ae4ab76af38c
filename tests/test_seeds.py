"""Seeds as a dimension: ``--seeds`` runs each seed as ``--set seed=K`` would (the same keys),
another seed trains other weights, a seed group is written and read as mean ± sd, paired tests
use the per-query mean, a difference within the seed spread is flagged, and the mean dev score
chooses."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
from pathlib import Path

import pytest
from toydata import write_tiny_settings, write_toy_mteb
from typer.testing import CliRunner

from bench.cli.main import app
from bench.cli.seeds import parse_seeds
from bench.experiments.sweep import SeedRun, Sweep, SweepRow, table_lines
from bench.reporting.figures import Records, chosen_on_dev, p_value, paired_tests
from bench.reporting.reference_documents import renderers
from bench.reporting.seeds import agreement_table
from bench.reporting.tables import SPREAD, build_comparison, render, render_csv
from bench.results.groups import (
    GroupRecord,
    choose_by_mean,
    group_label,
    group_record,
    make_group,
    read_group,
    read_member,
    write_group,
)
from bench.results.records import PER_QUERY, ResultRecord, write_result

cli = CliRunner()
TINY = ("--train-subset", "8", "--subset", "10", "--set", "epochs=1", "--set", "min_steps=0")


def bench(*args: str) -> str:
    result = cli.invoke(app, ["-q", *args])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


@pytest.fixture()
def toy(
    tmp_path: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch, tiny_bert: Path
) -> Path:
    write_toy_mteb(tmp_path / "data" / "toy")
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    folder = write_tiny_settings(tmp_path / "configs", tiny_bert)
    monkeypatch.setattr("bench.execution.ranker_settings.CONFIG_DIR", folder)
    return results_dir


# -- --seeds -------------------------------------------------------------------------------------
def test_seeds_are_a_count_or_a_list_and_refuse_what_is_no_group() -> None:
    assert parse_seeds(None) is None
    assert parse_seeds("3") == (0, 1, 2)
    assert parse_seeds("0, 4,2") == (0, 4, 2)
    for value, message in (
        ("1", "needs two seeds or more"),
        ("0,1,0", "seed 0 is given twice"),
        ("0,-1", "seeds are >= 0"),
        ("a,b", "expected a count or comma-separated seeds"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_seeds(value)
    with pytest.raises(ValueError, match="--seed 2 and --seeds 3: give one of them"):
        parse_seeds("3", seed=2)


def _plan_rows(out: str) -> list[list[str]]:
    """The plan table's rows as cells (kind, what, key, status, why)."""
    rows = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 5 and re.fullmatch(r"[0-9a-f]{12}", cells[2]):
            rows.append(cells)
    return rows


def test_plan_lists_one_training_per_seed_with_the_keys_of_seed_k(toy: Path) -> None:
    grouped = _plan_rows(
        bench("run", "-r", "monobert", "-d", "toy", "--seeds", "0,1,2", *TINY, "--plan")
    )
    trainings = [r for r in grouped if r[0] == "train"]
    assert len(trainings) == 3 and len({r[2] for r in trainings}) == 3
    scores = [r for r in grouped if r[0] == "score"]
    assert len(scores) == 3
    for k in range(3):  # the member of seed k: exactly the jobs of --set seed=k, key for key
        seed = ("--set", f"seed={k}") if k else ()  # seed 0: the plain run
        alone = _plan_rows(bench("run", "-r", "monobert", "-d", "toy", *seed, *TINY, "--plan"))
        wanted = {(r[0], r[2]) for r in alone if r[0] in ("train", "score", "dev baseline")}
        assert len(wanted) == 3 and wanted <= {(r[0], r[2]) for r in grouped}


@pytest.mark.parametrize(
    ("command", "trainings"),
    [
        (("train", "-r", "monobert", "-d", "toy", "--seeds", "3"), 3),
        (("sweep", "-r", "monobert", "-d", "toy", "--set", "lr=1e-4,3e-5", "--seeds", "2"), 4),
        (("ablate", "-d", "toy", "--what", "item-order", "-r", "monobert", "--seeds", "2"), 4),
    ],
)
def test_every_command_plans_each_seeds_trainings(
    toy: Path, command: tuple[str, ...], trainings: int
) -> None:
    rows = _plan_rows(bench(*command, "--plan"))
    keys = {r[2] for r in rows if r[0] == "train"}
    assert len(keys) == trainings


def test_seeds_are_refused_where_they_would_change_nothing(toy: Path) -> None:
    for args, message in (
        (("-r", "bm25", "--seeds", "2"), "bm25 is not trained by this command"),
        (("-r", "monobert", "--set", "seed=3", "--seeds", "2"), "--set seed=3 and --seeds 0,1"),
    ):
        result = cli.invoke(app, ["-q", "run", "-d", "toy", *args, "--plan"])
        assert result.exit_code == 2 and message in " ".join(result.output.split())


def _weights(results: Path) -> dict[str, str]:
    out = {}
    for path in (results / "models" / "toy" / "monobert").glob("*/training.json"):
        out[path.parent.name] = json.loads(path.read_text())["weights_hash"]
    return out


def test_a_group_reuses_the_seed_zero_run_trains_other_weights_per_seed_and_shows_mean_sd(
    toy: Path,
) -> None:
    bench("run", "-r", "monobert", "-d", "toy", *TINY)
    (first,) = (toy / "runs" / "toy" / "monobert").glob("test-*/record.json")
    before = first.read_bytes()
    out = bench("run", "-r", "monobert", "-d", "toy", "--seeds", "2", *TINY)
    assert "2 seeds" in out and "n=2" in out
    assert first.read_bytes() == before  # the seed-0 member is the single-seed run, reused
    weights = _weights(toy)
    assert len(weights) == 2 and len(set(weights.values())) == 2  # seed 1: another training
    (found,) = (toy / "runs" / "toy" / "monobert").glob("test-seeds-*.json")
    group = read_group(found)
    assert group.seeds == [0, 1] and group.members[0].record == "/".join(first.parts[-2:])
    row = group_record(group)
    ap = [m.metrics["AP@10"] for m in row.members]
    assert row.metrics["AP@10"] == pytest.approx((ap[0] + ap[1]) / 2)
    assert row.sd["AP@10"] == pytest.approx(abs(ap[0] - ap[1]) / math.sqrt(2))
    table = bench("compare", "-d", "toy", "--split", "test", "-f", "markdown")
    assert f"{row.label} [n=2: seeds 0, 1]" in table
    mean, sd = f"{row.metrics['AP@10']:.4f}", f"{row.sd['AP@10']:.4f}"
    assert f"**{mean}** ± {sd}" in table or f"| {mean} ± {sd}" in table  # bold when best
    again = bench("run", "-r", "monobert", "-d", "toy", "--seeds", "2", *TINY, "--plan")
    assert "to compute" not in again  # a finished group: every member reused


# -- the group record and its row ------------------------------------------------------------------
def _record(
    folder: Path,
    seed: int,
    ap: float,
    per_query: dict[str, float],
    rr: float | None = None,
    training: dict[str, object] | None = None,
    **extra: object,
) -> ResultRecord:
    record = ResultRecord(
        ranker="monobert",
        dataset="toy",
        split="test",
        family="early",
        label="monobert (fine-tuned)" if seed == 0 else f"monobert (seed={seed}, fine-tuned)",
        metrics={"AP@10": ap, **({} if rr is None else {"RR@10": rr})},
        latency={"p50_ms": 10.0 + seed},
        config={"lr": 1e-4, "seed": seed, **extra},
        run_config={"seed": 0, "device": "cpu"},
        config_hash=f"hash{seed}",
        data={"queries": len(per_query)},
        provenance={},
        key_parts={"data": "d", "code": "c"},
        created=f"2026-01-0{seed + 1}",
        training=training,
    )
    values = {q: dict.fromkeys(record.metrics, v) for q, v in per_query.items()}
    run = {q: {"doc": 1.0} for q in per_query}
    return write_result(record, run, values, folder / f"test-hash{seed}")


def test_a_two_seed_group_is_mean_and_sample_sd_with_the_per_query_mean(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "toy" / "monobert"
    a = _record(folder, 0, 0.70, {"q1": 1.0, "q2": 0.4})
    b = _record(folder, 1, 0.76, {"q1": 0.5, "q2": 0.9})
    group = write_group(make_group([b, a], "bench run --seeds 2"))
    assert group.path is not None and group.path.parent == folder
    assert [m.record for m in group.members] == ["test-hash0/record.json", "test-hash1/record.json"]
    row = group_record(read_group(group.path))
    assert row.label == "monobert (fine-tuned)" and row.seeds == [0, 1]
    assert row.metrics["AP@10"] == pytest.approx(0.73)  # (0.70 + 0.76) / 2
    assert row.sd["AP@10"] == pytest.approx(0.0424264068711929)  # 0.06 / sqrt(2)
    assert row.latency["p50_ms"] == pytest.approx(10.5)
    assert row.per_query() == {"q1": {"AP@10": 0.75}, "q2": {"AP@10": 0.65}}


def test_a_group_read_through_a_relative_path_finds_its_members(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bench group show results/.../GROUP.json`` from the project folder, as a user types it:
    the members are found next to the group, not under the file system's root."""
    folder = tmp_path / "runs" / "toy" / "monobert"
    runs = [_record(folder, k, 0.7, {"q1": 1.0}) for k in (0, 1)]
    group = write_group(make_group(runs))
    assert group.path is not None
    monkeypatch.chdir(tmp_path)
    relative = group.path.relative_to(tmp_path)
    assert group_record(read_group(relative)).seeds == [0, 1]


def test_a_group_refuses_runs_that_differ_in_more_than_the_seed(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    a = _record(folder, 0, 0.7, {"q1": 1.0})
    b = _record(folder, 1, 0.7, {"q1": 1.0}, epochs=3)
    with pytest.raises(ValueError, match=r"is not a reseed of .*: they differ in config epochs"):
        make_group([a, b])
    with pytest.raises(ValueError, match="at least two records"):
        make_group([a])
    assert (
        group_label("monobert (minilm-l6, seed=2, fine-tuned)")
        == "monobert (minilm-l6, fine-tuned)"
    )


def test_a_changed_member_makes_the_group_unreadable(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    group = write_group(
        make_group([_record(folder, 0, 0.7, {"q": 1.0}), _record(folder, 1, 0.6, {"q": 0.0})])
    )
    member = folder / "test-hash1" / "record.json"
    member.write_text(member.read_text().replace("0.6", "0.9"))
    assert group.path is not None
    with pytest.raises(
        ValueError, match="test-hash1/record.json does not match its recorded checksum"
    ):
        group_record(read_group(group.path))


def test_a_members_edited_or_missing_per_query_file_gives_the_group_no_marks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A group's per-query mean is read by the one checked reader: a member's file edited (or
    deleted) is named in a warning and a note, the group row gets no test, and the agreement
    report says why it measured nothing."""
    folder = tmp_path / "runs"
    a = _record(folder, 0, 0.70, {"q1": 1.0, "q2": 0.4})
    b = _record(folder, 1, 0.76, {"q1": 0.5, "q2": 0.9})
    group = write_group(make_group([a, b]))
    base = dataclasses.replace(
        _record(tmp_path / "base", 0, 0.10, {"q1": 0.1, "q2": 0.1}),
        ranker="bm25", label="bm25", family="sparse",
    )  # fmt: skip
    edited = folder / "test-hash1" / PER_QUERY
    edited.write_text("qid\tAP@10\nq1\t1.000000\nq2\t1.000000\n")
    with caplog.at_level("WARNING"):
        table = build_comparison([group_record(group), base], reference=False)
    assert not table.comparisons
    note = f"{edited} was changed since its run (SHA-256 "
    assert any(note in n and "monobert (fine-tuned)" in n for n in table.notes())
    assert any(note in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert agreement_table(group, group_record(group)).startswith(
        f"seed agreement not measured: {note}"
    )
    edited.unlink()
    assert group_record(group).member_problems == [
        f"{edited} is missing (record {folder / 'test-hash1' / 'record.json'} lists its SHA-256)"
    ]


def test_the_table_shows_mean_sd_and_flags_a_difference_within_the_seed_spread(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "runs"
    group = write_group(
        make_group(
            [
                _record(folder, 0, 0.70, {"q1": 1.0, "q2": 0.4}),
                _record(folder, 1, 0.76, {"q1": 0.5, "q2": 0.9}),
            ]
        )
    )
    row = group_record(group)
    near = dataclasses.replace(
        _record(tmp_path / "near", 0, 0.75, {"q1": 0.7, "q2": 0.7}),
        ranker="bm25", label="bm25", family="sparse",
    )  # fmt: skip
    far = dataclasses.replace(
        _record(tmp_path / "far", 0, 0.60, {"q1": 0.7, "q2": 0.7}),
        ranker="dpr", label="dpr", family="dual",
    )  # fmt: skip
    table = build_comparison([row, near], reference=False)
    text = render(table, "markdown")
    assert isinstance(text, str)
    assert "| monobert (fine-tuned) [n=2: seeds 0, 1] |" in text
    assert f"0.7300 ± 0.0424{SPREAD}" in text  # |0.73 - 0.75| = 0.02 < 0.0424
    assert "smaller than the seed spread" in text and "mean ± sample standard deviation" in text
    (comparison,) = table.comparisons  # the paired test read the per-query mean: 0.75 and 0.65
    assert comparison.n_queries == 2
    csv_text = render_csv(build_comparison([row, far], baseline="dpr", reference=False))
    header, *lines = csv_text.splitlines()
    assert header.endswith("AP@10_sd,seeds,within_seed_spread")
    assert any(line.endswith(",0.04242640687119289,0;1,") for line in lines)  # 0.13 > 0.0424


# -- choosing on dev -------------------------------------------------------------------------------
def _seed_run(seed: int, dev: float, test: float) -> SeedRun:
    return SeedRun(seed, dev, {"AP@10": test}, 1, 1.0, f"dev-{seed}", f"test-{seed}")


def test_the_mean_dev_score_chooses_where_seed_zero_would_choose_otherwise() -> None:
    a = SweepRow.of({"lr": "1e-4"}, [_seed_run(0, 0.80, 0.7), _seed_run(1, 0.60, 0.7)])
    b = SweepRow.of({"lr": "3e-5"}, [_seed_run(0, 0.78, 0.7), _seed_run(1, 0.76, 0.8)])
    sweep = Sweep("monobert", "toy", "AP@10", "dev", "test", "bench sweep", [a, b], "", [0, 1])
    by_seed_zero = choose_by_mean([[row.per_seed[0].dev] for row in sweep.rows])
    assert by_seed_zero == 0 and sweep.chosen == 1  # mean 0.70 against 0.77
    lines = table_lines(sweep)
    assert lines[0].split() == [
        "lr",
        "dev",
        "AP@10",
        "dev",
        "sd",
        "test",
        "AP@10",
        "test",
        "sd",
        "epoch",
        "train",
        "s",
    ]
    assert lines[2].split()[:3] == ["3e-5", "0.7700", "0.0141"]
    assert lines[-2] == "chosen on dev: lr=3e-5"
    assert lines[-1].startswith("chosen by the mean dev AP@10 over seeds 0, 1")
    assert isinstance(GroupRecord, type)


def test_a_reference_table_reads_groups_kept_with_their_members_and_chooses_by_mean_dev(
    tmp_path: Path,
) -> None:
    ref = tmp_path / "results" / "reference" / "seeds"
    ref.mkdir(parents=True)
    names = []
    for name, devs in (("a", (0.80, 0.60)), ("b", (0.78, 0.76))):
        members = []
        for seed, dev in enumerate(devs):
            run = _record(tmp_path / "runs" / name, seed, dev, {"q1": dev})
            assert run.path is not None
            kept = ref / f"{name}-seed{seed}.json"  # as results/reference keeps a run record
            shutil.copy(run.path / "record.json", kept)
            shutil.copy(run.path / "perquery.tsv", kept.with_suffix(".perquery.tsv"))
            members.append(read_member(kept))
        group = write_group(make_group(members), ref)
        assert group.path is not None and group.members[1].record == f"{name}-seed1.json"
        names.append(group.path.relative_to(tmp_path))
    records = Records("seeds", names, tmp_path)
    dev = [records.group(path.name) for path in names]
    assert [g.metrics["AP@10"] for g in dev] == [pytest.approx(0.70), pytest.approx(0.77)]
    assert dev[1].per_query() == {"q1": {"AP@10": pytest.approx(0.77)}}
    assert choose_by_mean([[g.metric_values("AP@10")[0]] for g in dev]) == 0  # seed 0 alone
    assert chosen_on_dev(dev) == 1


def test_the_seed_groups_table_renders_mean_sd_the_difference_and_its_paired_test(
    tmp_path: Path,
) -> None:
    ref = tmp_path / "results" / "reference"
    ref.mkdir(parents=True)
    names = []
    for name, runs in (
        ("a", ((0.80, 1.0, (0.9, 0.8, 0.7)), (0.60, 0.5, (0.5, 0.6, 0.7)))),
        ("b", ((0.78, 1.0, (0.9, 0.7, 0.74)), (0.76, 1.0, (0.8, 0.8, 0.74)))),
    ):
        members = []
        for seed, (ap, rr, per_query) in enumerate(runs):
            # group b trained: dev AP@10 kept at epoch 2 (0.70) and at epoch 1 (0.74)
            kept_dev = {"best_epoch": 2 - seed, "dev_AP@10": [[0.6, 0.70], [0.74, 0.5]][seed]}
            run = _record(
                tmp_path / "runs" / name,
                seed,
                ap,
                dict(zip(("q1", "q2", "q3"), per_query, strict=True)),
                rr,
                training=kept_dev if name == "b" else None,
            )
            assert run.path is not None
            kept = ref / f"{name}-seed{seed}.json"
            shutil.copy(run.path / "record.json", kept)
            shutil.copy(run.path / "perquery.tsv", kept.with_suffix(".perquery.tsv"))
            members.append(read_member(kept))
        group = write_group(make_group(members), ref)
        assert group.path is not None
        names.append(group.path.relative_to(tmp_path))
    text = renderers()["seed-groups"](Records("seeds", names, tmp_path))
    (paired,) = paired_tests(
        [({"q1": {"AP@10": 0.7}, "q2": {"AP@10": 0.7}, "q3": {"AP@10": 0.7}},
          {"q1": {"AP@10": 0.85}, "q2": {"AP@10": 0.75}, "q3": {"AP@10": 0.74}}, "AP@10")]
    )  # fmt: skip
    assert paired is not None
    lines = text.splitlines()
    assert lines[0] == (
        "| System | Supervision | Seeds | dev AP@10 (kept) | test AP@10 | test RR@10 "
        "| AP@10 vs first (points) | paired t-test p (Holm) |"
    )
    assert lines[2] == (
        "| monobert (fine-tuned) | not trained here | 2 (0, 1) | – | 0.7000 ± 0.1414 "
        "| 0.7500 ± 0.3536 | – | – |"
    )
    assert lines[3].split(" | ")[3:] == [
        "0.7200 ± 0.0283",  # (0.70 + 0.74) / 2, sd 0.04 / sqrt(2)
        "0.7700 ± 0.0141",
        "1.0000 ± 0.0000",
        "+7.00≈",
        f"{p_value(paired.p_holm, paired.significant)} |",
    ]


# -- how far the seeds reproduce one another (repro-eval) ------------------------------------------
def test_seed_agreement_is_repro_evals_tau_union_rbo_and_rmse() -> None:
    pytest.importorskip("repro_eval")
    from bench.results.reproduction import agreement

    run_a = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    run_b = {"q": {"a": 3.0, "c": 2.0, "b": 1.0}}
    pq_a, pq_b = {"q": {"AP@10": 1.0}}, {"q": {"AP@10": 0.5}}
    same = agreement((0, run_a, pq_a), (1, run_a, pq_a))
    assert (same.ktu, same.rbo, same.rmse) == (1.0, 1.0, {"AP@10": 0.0})
    swapped = agreement((0, run_a, pq_a), (1, run_b, pq_b))
    assert swapped.ktu == pytest.approx(1 / 3)
    # overlap at depth 1, 2, 3: 1/1, 1/2, 3/3, weighted 1, 0.95, 0.95^2
    assert swapped.rbo == pytest.approx((1 + 0.95 * 0.5 + 0.9025) / (1 + 0.95 + 0.9025))
    assert swapped.rmse == {"AP@10": pytest.approx(0.5)}
    # a query with one candidate has no order: tau is the mean over the other queries
    lone = {"q": run_a["q"], "z": {"a": 1.0}}
    with_lone = agreement(
        (0, lone, {**pq_a, "z": {"AP@10": 1.0}}),
        (1, {**run_b, "z": {"a": 2.0}}, {**pq_b, "z": {"AP@10": 1.0}}),
    )
    assert with_lone.queries == 2 and with_lone.ktu == pytest.approx(1 / 3)


def test_without_repro_eval_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from bench.results import reproduction

    monkeypatch.setitem(sys.modules, "repro_eval.measure.document_order", None)
    with pytest.raises(ImportError, match=r"pip install 'crossjem-bench\[repro\]'"):
        reproduction.agreement((0, {}, {}), (1, {}, {}))
