"""bench.reporting.tables on result records written to disk with per-query values chosen so that the
significance outcome is known in advance."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from bench.reporting.tables import HARNESS, PAPER_SOURCE, build_comparison, render
from bench.results.records import (
    PER_QUERY,
    RECORD,
    ResultRecord,
    config_hash,
    file_sha256,
    load_records,
    run_dir,
    supervision,
    write_result,
)

BASE = [0.1, 0.2, 0.3, 0.4, 0.5, 0.1, 0.2, 0.3]  # bm25's AP@10 and RR@10 on q1..q8
ALTERNATE = [0.01, -0.01] * 4  # mean difference 0


def shifted(values: list[float], by: float | list[float]) -> list[float]:
    deltas = by if isinstance(by, list) else [by] * len(values)
    return [round(v + d, 6) for v, d in zip(values, deltas, strict=True)]


def make_record(
    root: Path,
    ranker: str,
    family: str,
    values: dict[str, list[float]],
    *,
    label: str | None = None,
    dataset: str = "wikiqa",
    split: str = "test",
    latency: dict | None = None,
    created: str = "2025-01-01T00:00:00",
    config: dict | None = None,
) -> ResultRecord:
    """Write a record whose per-query values are ``values`` (metric -> one value per query)."""
    n = len(next(iter(values.values())))
    per_query = {f"q{i + 1}": {m: v[i] for m, v in values.items()} for i in range(n)}
    metrics = {m: sum(v) / n for m, v in values.items()}
    config = config or {}
    chash = config_hash({"ranker": ranker, "config": config, "label": label, "created": created})
    rec = ResultRecord(
        ranker=ranker,
        dataset=dataset,
        split=split,
        family=family,
        label=label or ranker,
        metrics=metrics,
        latency=latency or {},
        config=config,
        run_config={},
        config_hash=chash,
        data={},
        provenance={},
        created=created,
    )
    return write_result(rec, {}, per_query, run_dir(root, dataset, ranker, split, chash))


@pytest.fixture()
def records(tmp_path: Path) -> list[ResultRecord]:
    """bm25 baseline; dpr: AP@10 +0.3 on every query (significant), RR@10 equal; crossjem: AP@10
    mean difference 0 (p = 1), RR@10 +0.4 on every query (significant). Written in the wrong
    family order on purpose, and read back from disk."""
    make_record(
        tmp_path,
        "crossjem",
        "joint",
        {"AP@10": shifted(BASE, ALTERNATE), "RR@10": shifted(BASE, 0.4)},
        label="CROSS-JEM",
        latency={"p50_ms": 3.2, "candidates_per_s": 3100.0},
    )
    make_record(
        tmp_path,
        "bm25",
        "sparse",
        {"AP@10": BASE, "RR@10": BASE},
        latency={"p50_ms": 0.4, "candidates_per_s": 25000.0},
    )
    make_record(
        tmp_path,
        "dpr",
        "dual",
        {"AP@10": shifted(BASE, 0.3), "RR@10": BASE},
        label="DPR",
        latency={"p50_ms": 12.5, "candidates_per_s": 800.0},
    )
    return load_records(tmp_path)


def cell(table, label: str, key: str):
    [row] = [r for r in table.rows if r.label == label]
    return row.cells[key]


def test_family_order_and_columns(records: list[ResultRecord]) -> None:
    table = build_comparison(records)
    assert [g.family for g in table.groups] == ["sparse", "dual", "joint"]
    assert [g.title for g in table.groups] == ["Sparse", "Dual encoders", "Joint ranking"]
    assert [r.label for r in table.rows] == ["bm25", "DPR", "CROSS-JEM"]
    assert [c.key for c in table.columns] == ["AP@10", "RR@10", "p50_ms", "candidates_per_s"]
    assert [c.key for c in build_comparison(records, latency=False).columns] == ["AP@10", "RR@10"]
    assert [c.key for c in build_comparison(records, metrics=["RR@10"]).columns][0] == "RR@10"


def test_bold_goes_to_the_best(records: list[ResultRecord]) -> None:
    table = build_comparison(records)
    best = {c.key: [r.label for r in table.rows if r.cells[c.key].best] for c in table.columns}
    assert best == {
        "AP@10": ["DPR"],
        "RR@10": ["CROSS-JEM"],
        "p50_ms": ["bm25"],  # lower is better
        "candidates_per_s": ["bm25"],
    }


def test_dagger_placement_ttest(records: list[ResultRecord]) -> None:
    table = build_comparison(records)
    assert table.baseline == "bm25"
    marked = {(r.label, k) for r in table.rows for k, c in r.cells.items() if c.significant}
    assert marked == {("DPR", "AP@10"), ("CROSS-JEM", "RR@10")}
    # constant shifts -> p = 0; equal vectors and zero mean difference -> p = 1 (Holm keeps 1)
    assert cell(table, "DPR", "AP@10").comparison.p_value == 0.0
    assert cell(table, "DPR", "RR@10").comparison.p_adjusted == 1.0
    assert cell(table, "CROSS-JEM", "AP@10").comparison.p_adjusted == pytest.approx(1.0)
    assert cell(table, "bm25", "AP@10").comparison is None
    assert {c.n_queries for c in table.comparisons} == {8}


def test_randomisation_exact_and_holm(records: list[ResultRecord]) -> None:
    table = build_comparison(records, test="randomisation", baseline="bm25")
    # 8 queries: exact over 2^8 sign vectors; a constant shift is reached only by the all-plus
    # and all-minus vectors -> p = 2/256; Holm over the 2 systems doubles the smaller p
    dpr = cell(table, "DPR", "AP@10").comparison
    assert dpr.p_value == pytest.approx(2 / 256)
    assert dpr.p_adjusted == pytest.approx(4 / 256)
    assert cell(table, "DPR", "AP@10").significant
    assert cell(table, "CROSS-JEM", "AP@10").comparison.p_value == 1.0
    assert not cell(table, "CROSS-JEM", "AP@10").significant
    assert any("randomisation" in note for note in table.notes())


def test_baseline_by_label_and_errors(records: list[ResultRecord]) -> None:
    table = build_comparison(records, baseline="DPR")
    assert table.baseline == "DPR"
    # against DPR, bm25's AP@10 is 0.3 lower everywhere: significant too (two-sided)
    assert cell(table, "bm25", "AP@10").significant
    assert build_comparison(records, baseline="dpr").baseline == "DPR"  # by ranker name
    with pytest.raises(ValueError, match="baseline 'colbert' matches no ranker or label"):
        build_comparison(records, baseline="colbert")
    no_bm25 = [r for r in records if r.ranker != "bm25"]
    assert build_comparison(no_bm25).baseline is None
    assert not any(c.significant for r in build_comparison(no_bm25).rows for c in r.cells.values())


def test_notes_say_what_the_dagger_means(records: list[ResultRecord]) -> None:
    notes = " ".join(build_comparison(records, alpha=0.01).notes())
    assert "†: significantly different from the baseline bm25" in notes
    assert "alpha = 0.01" in notes
    assert "paired t-test" in notes
    assert "8 shared queries" in notes
    assert "Holm-Bonferroni across the 2 compared system(s)" in notes


def test_json_shape_exactly(records: list[ResultRecord]) -> None:
    data = json.loads(render(build_comparison(records, metrics=["AP@10"]), "json"))
    assert data == [
        {
            "ranker": "bm25",
            "dataset": "wikiqa",
            "split": "test",
            "label": "bm25",
            "supervision": "not trained here",
            "metrics": {"AP@10": pytest.approx(sum(BASE) / 8)},
            "latency": {"p50_ms": 0.4, "candidates_per_s": 25000.0},
            "below_dev_baselines": [],
        },
        {
            "ranker": "dpr",
            "dataset": "wikiqa",
            "split": "test",
            "label": "DPR",
            "supervision": "not trained here",
            "metrics": {"AP@10": pytest.approx(sum(BASE) / 8 + 0.3)},
            "latency": {"p50_ms": 12.5, "candidates_per_s": 800.0},
            "below_dev_baselines": [],
        },
        {
            "ranker": "crossjem",
            "dataset": "wikiqa",
            "split": "test",
            "label": "CROSS-JEM",
            "supervision": "not trained here",
            "metrics": {"AP@10": pytest.approx(sum(BASE) / 8)},
            "latency": {"p50_ms": 3.2, "candidates_per_s": 3100.0},
            "below_dev_baselines": [],
        },
    ]


def test_csv_header_and_rows(records: list[ResultRecord]) -> None:
    lines = render(build_comparison(records), "csv").splitlines()
    assert lines[0] == (
        "dataset,split,family,label,ranker,source,supervision,AP@10,RR@10,p50_ms,candidates_per_s,"
        "significant,below_dev_baselines"
    )
    assert lines[2].startswith("wikiqa,test,dual,DPR,dpr,harness,not trained here,0.5625")
    assert lines[2].endswith(",12.5,800.0,AP@10,")
    assert lines[3].endswith(",3.2,3100.0,RR@10,")
    assert len(lines) == 4


def test_markdown_header_bold_and_dagger(records: list[ResultRecord]) -> None:
    text = render(build_comparison(records), "markdown")
    lines = text.splitlines()
    assert "| Family | System | Supervision | AP@10 | RR@10 | p50 ms | cand/s |" in lines
    sep = lines[
        lines.index("| Family | System | Supervision | AP@10 | RR@10 | p50 ms | cand/s |") + 1
    ]
    assert sep == "|:---|:---|:---|---:|---:|---:|---:|"
    assert (
        "| Dual encoders | DPR | not trained here | **0.5625**† | 0.2625† |" not in text
    )  # RR@10 not marked
    assert "| Dual encoders | DPR | not trained here | **0.5625**† | 0.2625 | 12.5 | 800 |" in lines
    assert "| Sparse | bm25 | not trained here | 0.2625 | 0.2625 | **0.4** | **25,000** |" in lines
    assert any(line.startswith("†: significantly different") for line in lines)


def test_latex_booktabs_textbf_dagger(records: list[ResultRecord]) -> None:
    text = render(build_comparison(records), "latex")
    for token in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}{lllrrrr}"):
        assert token in text
    assert (
        r"Dual encoders & DPR & not trained here & "
        r"\textbf{0.5625}$^{\dagger}$ & 0.2625 & 12.5 & 800 \\" in text
    )
    assert r"$^{\dagger}$: significantly different" in text  # the caption explains the mark
    assert "†" not in text


def test_rich_table(records: list[ResultRecord]) -> None:
    table = render(build_comparison(records), "table")
    assert isinstance(table, Table)
    console = Console(width=200, record=True, color_system=None)
    console.print(table)
    out = console.export_text()
    assert "0.5625†" in out and "CROSS-JEM" in out and "significantly different" in out


def test_reference_rows_for_sodq(tmp_path: Path) -> None:
    recs = [
        make_record(
            tmp_path, "bm25", "sparse", {"AP@5": [0.2, 0.4], "AP@10": [0.3, 0.5]}, dataset="sodq"
        ),
    ]
    table = build_comparison(recs)
    paper = [r for r in table.rows if r.source == PAPER_SOURCE]
    assert table.groups[-1].family == PAPER_SOURCE
    assert [r.label for r in paper][:2] == ["BM25", "monoBERT"]
    assert len(paper) == 10 and "INSTRUCTOR*" in [r.label for r in paper]
    assert paper[0].cells["AP@10"].value == pytest.approx(0.3926)
    assert not any(c.best or c.significant for r in paper for c in r.cells.values())
    assert [r.source for r in table.rows if r.source == HARNESS] == [HARNESS]
    # harness bm25 AP@10 = 0.4 is bold even though the paper's CROSS-JEM has 0.5305
    assert table.rows[0].cells["AP@10"].best
    md = render(table, "markdown")
    assert "| Paper (published) | BM25 (paper) | as published | 0.3280 | 0.3926 |" in md
    assert "CROSS-JEM-6L (paper) | as published | 0.5240 | 0.5305 |" in md
    assert len(json.loads(render(table, "json"))) == 1  # reference rows stay out of json
    assert "paper" in render(table, "csv").splitlines()[2]
    assert not [r for r in build_comparison(recs, reference=False).rows if r.source == "paper"]


def test_no_reference_rows_for_other_datasets_or_metrics(
    tmp_path: Path, records: list[ResultRecord]
) -> None:
    assert not [r for r in build_comparison(records).rows if r.source == PAPER_SOURCE]
    sodq = make_record(tmp_path, "bm25", "sparse", {"nDCG@10": [0.5]}, dataset="sodq")
    assert not [r for r in build_comparison([sodq]).rows if r.source == PAPER_SOURCE]


def test_newest_record_wins_and_configs_are_rows(tmp_path: Path) -> None:
    make_record(tmp_path, "bm25", "sparse", {"AP@10": [0.1, 0.1]}, created="2025-01-01T00:00:00")
    make_record(tmp_path, "bm25", "sparse", {"AP@10": [0.7, 0.7]}, created="2025-03-01T00:00:00")
    make_record(tmp_path, "bm25", "sparse", {"AP@10": [0.3, 0.3]}, created="2025-02-01T00:00:00")
    make_record(
        tmp_path, "bm25", "sparse", {"AP@10": [0.2, 0.4]}, label="bm25 (k1=0.9)", config={"k1": 0.9}
    )
    table = build_comparison(load_records(tmp_path), baseline="bm25")
    assert {r.label: r.cells["AP@10"].value for r in table.rows} == {
        "bm25": pytest.approx(0.7),
        "bm25 (k1=0.9)": pytest.approx(0.3),
    }
    # the default baseline is the row labelled bm25, else the only bm25 row
    assert build_comparison(load_records(tmp_path)).baseline == "bm25"


def test_ambiguous_default_baseline_is_not_guessed(tmp_path: Path) -> None:
    for k1 in (0.9, 1.2):
        make_record(tmp_path, "bm25", "sparse", {"AP@10": [0.2, k1 / 3]}, label=f"BM25 k1={k1}")
    table = build_comparison(load_records(tmp_path))
    assert table.baseline is None and not table.comparisons
    assert any("several bm25 rows (BM25 k1=0.9, BM25 k1=1.2)" in n for n in table.notes())
    with pytest.raises(ValueError, match="baseline 'bm25' is ambiguous"):
        build_comparison(load_records(tmp_path), baseline="bm25")
    assert build_comparison(load_records(tmp_path), baseline="BM25 k1=1.2").baseline


def test_record_without_per_query_values_is_listed_untested(
    tmp_path: Path, records: list[ResultRecord]
) -> None:
    dpr = next(r for r in records if r.ranker == "dpr")
    (dpr.path / PER_QUERY).write_text("qid\tAP@10\tRR@10\n")  # a file with no queries
    dpr.files[PER_QUERY] = file_sha256(dpr.path / PER_QUERY)
    table = build_comparison(records)
    assert table.untested == ["DPR"]
    assert not cell(table, "DPR", "AP@10").significant
    assert cell(table, "CROSS-JEM", "RR@10").significant
    assert any("Not tested for significance" in n and "DPR" in n for n in table.notes())


def test_an_edited_or_missing_per_query_file_is_named_and_gives_no_marks(
    tmp_path: Path, records: list[ResultRecord], caplog: pytest.LogCaptureFixture
) -> None:
    """A run's perquery.tsv edited to all 1.0 marked it better than bm25 on every metric (and a
    deleted one silently dropped its marks): the SHA-256 its record lists is checked, the file
    named in a warning and a note, and the row shown without marks."""
    crossjem = next(r for r in records if r.ranker == "crossjem")
    dpr = next(r for r in records if r.ranker == "dpr")
    edited = crossjem.path / PER_QUERY
    edited.write_text(
        "qid\tAP@10\tRR@10\n" + "".join(f"q{i}\t1.000000\t1.000000\n" for i in range(1, 9))
    )
    (dpr.path / PER_QUERY).unlink()
    with caplog.at_level("WARNING"):
        table = build_comparison(records)
    for label in ("CROSS-JEM", "DPR"):
        assert not any(cell(table, label, m).significant for m in ("AP@10", "RR@10")), label
        assert cell(table, label, "AP@10").comparison is None
    assert table.untested == []
    assert {c.system for c in table.comparisons} == set()
    changed = (
        f"Not tested for significance: CROSS-JEM: {edited} was changed since its run (SHA-256 "
        f"{file_sha256(edited)[:12]}..., record {crossjem.path / RECORD} lists "
        f"{crossjem.files[PER_QUERY][:12]}...)."
    )
    missing = (
        f"Not tested for significance: DPR: {dpr.path / PER_QUERY} is missing (record "
        f"{dpr.path / RECORD} lists its SHA-256)."
    )
    assert changed in table.notes() and missing in table.notes()
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(str(edited) in w and "was changed since its run" in w for w in warned)
    assert any(f"{dpr.path / PER_QUERY} is missing" in w for w in warned)
    assert changed in render(table, "markdown")


def test_input_errors(tmp_path: Path, records: list[ResultRecord]) -> None:
    other = make_record(tmp_path, "bm25", "sparse", {"AP@10": [0.5]}, split="dev")
    with pytest.raises(ValueError, match="several dataset splits .*wikiqa/dev, wikiqa/test"):
        build_comparison([*records, other])
    with pytest.raises(ValueError, match="no result records"):
        build_comparison([])
    with pytest.raises(ValueError, match="metric\\(s\\) MRR@10 in no record"):
        build_comparison(records, metrics=["MRR@10"])
    with pytest.raises(ValueError, match="unknown table format 'html'"):
        render(build_comparison(records), "html")


def test_paper_reference_data() -> None:
    from bench.reporting.paper import ABLATIONS, LATENCY, paper_reference

    marco = {r.ranker: r for r in paper_reference("MSMARCO-Titles")}
    assert marco["crossjem"].metrics == {"RR@5": 0.3382, "RR@10": 0.3545}
    assert marco["bm25"].params is None and marco["rankinggpt"].params == 7_000_000_000
    assert marco["instructor"].label == "INSTRUCTOR*" and marco["colbert"].params == 109_000_000
    assert [r.ranker for r in paper_reference("sodq")][-1] == "crossjem"
    assert paper_reference("sodq")[0].metrics == {"AP@5": 0.328, "AP@10": 0.3926}
    assert paper_reference("wikiqa") == []
    # the loss ablation's RPL row is the main table's CROSS-JEM MRR@10 on MS MARCO-Titles
    rpl = next(a for a in ABLATIONS if a.variant == "RPL")
    assert rpl.metrics["RR@10"] == marco["crossjem"].metrics["RR@10"]
    ms = {r.ranker: r.mean_ms for r in LATENCY}
    assert ms["monobert"] / ms["crossjem"] == pytest.approx(41.3 / 9.8)


def test_json_writes_infinite_latency_as_null(tmp_path: Path) -> None:
    rec = make_record(
        tmp_path,
        "bm25",
        "sparse",
        {"AP@10": [0.5]},
        latency={"p50_ms": 0.0, "candidates_per_s": float("inf")},
    )
    [row] = json.loads(render(build_comparison([rec]), "json"))
    assert row["latency"] == {"p50_ms": 0.0, "candidates_per_s": None}


def test_supervision_says_what_each_row_was_trained_on() -> None:
    assert supervision(None) == "not trained here"
    assert supervision({"targets": "qrels grades", "loss_name": "bce"}) == "labels, bce"
    teacher = {"name": "monobert", "weights_hash": "ab", "scores": "logits"}
    summary = {"teacher": teacher, "loss_name": "listnet"}
    assert supervision(summary) == "teacher monobert (logits), listnet"
    grown = {**summary, "train_items": 300, "train_items_given": 100, "train_queries": 10}
    assert supervision(grown) == "teacher monobert (logits), listnet, lists of 30"
    ensemble = {"teacher": {"name": "monobert+colbert", "scores": "sigmoid"}, "loss_name": "pl"}
    assert supervision(ensemble) == "teacher monobert+colbert, pl"


def test_a_model_below_a_no_training_baseline_on_dev_is_marked(
    records: list[ResultRecord],
) -> None:
    """What training found (training.dev_baselines) is in every format, so no format hides a
    model that did not beat its baselines."""
    verdict = {"below": ["bm25", "dpr"], "not_significantly_above": [], "kept": 0.5}
    (crossjem,) = [r for r in records if r.ranker == "crossjem"]
    flagged = dataclasses.replace(crossjem, training={"dev_baselines": verdict, "loss_name": "bce"})
    others = [r for r in records if r is not crossjem]
    table = build_comparison([*others, flagged], metrics=["AP@10"])
    legend = (
        "‡: its model, trained here, scored below a ranker that needs no training on the dev "
        "split (training.dev_baselines in the record): CROSS-JEM below bm25, dpr."
    )
    lines = render(table, "markdown").splitlines()
    assert "| Joint ranking | CROSS-JEM ‡ | labels, bce | 0.2625 | 3.2 | 3,100 |" in lines
    assert "| Sparse | bm25 | not trained here | 0.2625 | **0.4** | **25,000** |" in lines
    assert f"{legend}  " in lines
    console = Console(width=400, record=True, color_system=None)
    console.print(render(table, "table"))
    out = console.export_text()
    assert "CROSS-JEM ‡" in out and legend in " ".join(out.split())
    rows = {row["label"]: row for row in json.loads(render(table, "json"))}
    assert rows["CROSS-JEM"]["below_dev_baselines"] == ["bm25", "dpr"]
    assert rows["bm25"]["below_dev_baselines"] == []
    assert render(table, "csv").splitlines()[-1].endswith(",bm25;dpr")
    assert r"CROSS-JEM $^{\ddagger}$ &" in render(table, "latex")
    unflagged = build_comparison(records, metrics=["AP@10"])
    assert not any("‡" in note for note in unflagged.notes())


def test_one_writer_lays_out_markdown_and_rich_tables() -> None:
    """Every table goes through bench.core.writer: the README's plain markdown, aligned
    markdown with a bar in a header escaped, a titled table with its notes, and a rich table
    with a line between groups of rows."""
    from bench.core import writer

    assert writer.markdown(["a", "b"], [["1", "2"]]) == "| a | b |\n|---|---|\n| 1 | 2 |\n"
    aligned = writer.markdown(["x|y", "n"], [["p", "3"], ["q", "4"]], text_columns=1)
    assert aligned.splitlines() == ["| x\\|y | n |", "|:---|---:|", "| p | 3 |", "| q | 4 |"]
    titled = writer.titled("T", aligned, ["one", "two"])
    assert titled == "**T**\n\n" + aligned + "\none  \ntwo  \n"
    out = writer.rich("T [x]", ["name", "n"], [[["a", "1"]], [["b", "2"]]], 1, caption="c")
    assert [c.justify for c in out.columns] == ["left", "right"]
    assert [r.end_section for r in out.rows] == [True, True]
    console = Console(width=40, record=True, color_system=None)
    console.print(out)
    text = console.export_text()
    assert text.splitlines()[0].strip() == "T [x]"
    assert text.index(" a ") < text.index("├") < text.index(" b ")
    assert text.rstrip().splitlines()[-1].strip() == "c"


def test_the_token_store_table_is_laid_out_by_the_writer() -> None:
    """``python -m bench.latency.storecost`` prints its rows through the one writer: a timed row
    beside its traced twin, ``nan`` and ``-`` where a figure is missing."""
    from bench.latency.storecost import table

    rows = [
        {"items": 100000, "store": "flat", "traced": False, "seconds": 1.234}
        | {"peak_added_mb": 1234.4, "tokens": 3200000, "load_before": [2.5, 1, 1]},
        {"items": 100000, "store": "flat", "traced": True}
        | {"traced_peak_mb": 99.6, "traced_held_mb": 12.2},
        {"items": 100000, "store": "bm25", "traced": False, "seconds": 0.5}
        | {"peak_added_mb": 10.0, "load_before": [0.25, 1, 1]},
    ]
    assert table(rows).splitlines() == [
        "| items | store | index time (s) | peak RSS added (MB) | traced peak (MB) | "
        "held after (MB, traced) | tokens held | load (1 min) |",
        "|---|---|---|---|---|---|---|---|",
        "| 100,000 | flat | 1.23 | 1,234 | 100 | 12 | 3,200,000 | 2.50 |",
        "| 100,000 | bm25 | 0.50 | 10 | nan | nan | - | 0.25 |",
    ]


def test_one_markdown_table_writer() -> None:
    """No module but bench/core/writer.py writes a markdown separator line itself (a string with
    a ``---|`` cell): every table, the reports' and the latency room's alike, is laid out by the
    one writer, so two tables cannot drift apart."""
    import ast
    import re

    root = Path(__file__).resolve().parent.parent
    cell = re.compile(r"-{3,}:?\s*\|")
    found = []
    for path in sorted([*(root / "bench").rglob("*.py"), *(root / "rankers").rglob("*.py")]):
        if path == root / "bench" / "core" / "writer.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and any(cell.search(line) for line in text.splitlines()):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {text[:40]!r}")
    assert not found, "a markdown table written outside bench/core/writer.py:\n" + "\n".join(found)
