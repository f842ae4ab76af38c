"""README figures rendered from records: `bench reference render|check` (bench.reporting.figures).

The checkout's README must match its records, rendering must be idempotent and touch nothing
outside the markers, and a one-digit change to any rendered figure must fail the check with a
message naming the table, both values and the record. No model is loaded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.reporting.figures import (
    Block,
    Records,
    ReferenceError,
    find_blocks,
    read_comparison,
    renderer,
)
from bench.reporting.picks import pick
from bench.reporting.reference_documents import check_document, render_document, renderers

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
RESULTS_DOC = REPO / "docs" / "results.md"
#: every document with rendered tables: the README and docs/
DOCUMENTS = [README, *sorted((REPO / "docs").glob("*.md"))]
runner = CliRunner()


@pytest.fixture(scope="module")
def readme() -> str:
    """The README and every docs/ page as one text (each block is checked on its own)."""
    return "\n".join(p.read_text(encoding="utf-8") for p in DOCUMENTS)


def _marked(block: Block, body: str) -> str:
    records = ", ".join(p.as_posix() for p in block.records)
    return f"<!-- reference: {block.name} from {records} -->\n{body}<!-- /reference -->\n"


def test_checkout_readme_matches_its_records(readme: str) -> None:
    blocks = find_blocks(readme)
    assert len(blocks) >= 20  # the result tables of README and docs are marked, not typed
    assert find_blocks(README.read_text(encoding="utf-8"))  # the README's headline table
    assert check_document(readme, REPO) == []


def test_render_is_idempotent_and_only_touches_marked_text(readme: str) -> None:
    assert render_document(readme, REPO) == readme
    first = find_blocks(readme)[0]
    stale = readme[: first.start] + "| stale | table |\n" + readme[first.end :]
    rendered = render_document(stale, REPO)
    assert rendered == readme
    assert render_document(rendered, REPO) == rendered


def _one_digit_changes(body: str) -> list[tuple[int, str]]:
    """(line index, changed line) for the last digit of every figure of ``body``: each cell of
    a table's data lines after the label cell, and each line of text under a table."""
    lines = body.splitlines(keepends=True)
    out = []
    for i, line in enumerate(lines):
        if i == 0 or line.startswith("|---"):
            continue  # the header names columns, it holds no figure
        if line.startswith("|"):
            spans = [(m.start(1), m.end(1)) for m in re.finditer(r"\|([^|]*)", line)][1:]
        else:
            spans = [(0, len(line))]
        for start, end in spans:
            digits = [m.start() for m in re.finditer(r"\d", line[start:end])]
            if digits:
                at = start + digits[-1]
                new = "0" if line[at] != "0" else "1"
                out.append((i, line[:at] + new + line[at + 1 :]))
    return out


def test_every_rendered_figure_changed_by_one_digit_fails_the_check(readme: str) -> None:
    """Each figure of every table, its last digit changed, is caught and named."""
    checked = 0
    for block in find_blocks(readme):
        lines = block.body.splitlines(keepends=True)
        for i, changed in _one_digit_changes(block.body):
            body = "".join(lines[:i] + [changed] + lines[i + 1 :])
            found = check_document(_marked(block, body), REPO)
            assert len(found) == 1, (block.name, changed)
            mismatch = found[0]
            assert mismatch.table == block.name
            assert mismatch.document != mismatch.record
            assert mismatch.document in changed and mismatch.record in lines[i]
            assert mismatch.records == block.records
            checked += 1
    assert checked > 200


def test_cli_check_names_table_figure_and_record(tmp_path: Path, readme: str) -> None:
    block = next(b for b in find_blocks(readme) if b.name == "main-job-semeval16b")
    assert "| 0.7841 |" in block.body
    body = block.body.replace("| 0.7841 |", "| 0.7842 |", 1)
    copy = tmp_path / "README.md"
    copy.write_text(readme[: block.start] + body + readme[block.end :], encoding="utf-8")

    result = runner.invoke(app, ["reference", "check", "--readme", str(copy), "--root", str(REPO)])
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "'main-job-semeval16b'" in out
    assert "'0.7842'" in out and "'0.7841'" in out and "'AP@10'" in out
    assert "results/reference/main-job-semeval16b.md" in out

    result = runner.invoke(app, ["reference", "render", "--readme", str(copy), "--root", str(REPO)])
    assert result.exit_code == 0, result.output
    assert copy.read_text(encoding="utf-8") == readme


def test_cli_check_passes_on_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["reference", "check", "--readme", str(README), "--root", str(REPO)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    monkeypatch.chdir(REPO)  # default: README.md and docs/*.md, records from the repository
    result = runner.invoke(app, ["reference", "check"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "docs/results.md:" in out and "rendered tables match their records" in out


def test_a_damaged_table_in_docs_fails_the_default_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --readme the check reads README.md and docs/*.md; records resolve from the first
    folder upwards that holds results/."""
    (tmp_path / "docs").mkdir()
    for folder in ("results", "rankers"):  # record paths start at the repository root
        (tmp_path / folder).symlink_to(REPO / folder)
    (tmp_path / "README.md").write_text(README.read_text(encoding="utf-8"), encoding="utf-8")
    text = RESULTS_DOC.read_text(encoding="utf-8")
    assert "| 0.7830 |" in text
    (tmp_path / "docs" / "results.md").write_text(
        text.replace("| 0.7830 |", "| 0.7831 |", 1), encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["reference", "check"])
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "docs/results.md line" in out and "'0.7831'" in out and "'0.7830'" in out


def test_cli_check_fails_without_markers(tmp_path: Path) -> None:
    copy = tmp_path / "README.md"
    copy.write_text("# no tables\n", encoding="utf-8")
    result = runner.invoke(app, ["reference", "check", "--readme", str(copy)])
    assert (
        result.exit_code == 1
        and result.exception is None
        or isinstance(result.exception, SystemExit)
    )
    assert "no rendered tables (markers)" in " ".join(result.output.split())


def test_broken_markers_and_unknown_renderers_are_errors() -> None:
    with pytest.raises(ReferenceError, match="unmatched"):
        find_blocks("<!-- reference: main-job-semeval16b from x.md -->\n| a |\n")
    with pytest.raises(ReferenceError, match="unmatched"):
        find_blocks("text\n<!-- /reference -->\n")
    # quoted in prose (not a line of its own), the syntax is not a marker
    assert find_blocks("see `<!-- reference: NAME from RECORD -->` above\n") == []
    with pytest.raises(ReferenceError, match="no renderer 'nope'"):
        check_document("<!-- reference: nope from README.md -->\n<!-- /reference -->\n", REPO)
    with pytest.raises(ReferenceError, match="no record results/reference/missing.json"):
        render_document(
            "<!-- reference: main-job-semeval16b from results/reference/missing.json -->\n"
            "<!-- /reference -->\n",
            REPO,
        )


def test_a_renderer_reads_only_the_records_its_marker_names() -> None:
    wrong = (
        "<!-- reference: main-job-semeval16b from results/reference/accuracy-wikiqa.json -->\n"
        "<!-- /reference -->\n"
    )
    with pytest.raises(ReferenceError, match="does not name"):
        render_document(wrong, REPO)


def test_a_new_table_is_one_function_and_one_marker(tmp_path: Path) -> None:
    @renderer("test-bm25-wikiqa")
    def bm25_row(records: Records) -> str:
        row = records.row("accuracy-wikiqa.json", pick("bm25"))
        return f"bm25 AP@10 {row.metrics['AP@10']:.4f}\n"

    doc = (
        "intro\n<!-- reference: test-bm25-wikiqa from results/reference/accuracy-wikiqa.json -->\n"
        "<!-- /reference -->\noutro\n"
    )
    assert render_document(doc, REPO) == doc.replace("-->\n<!--", "-->\nbm25 AP@10 0.6175\n<!--")


def test_markdown_and_json_comparisons_agree() -> None:
    """The markdown reader gives the json's figures to the four decimals it printed."""
    md = read_comparison(REPO / "results/reference/accuracy-wikiqa.md")
    js = read_comparison(REPO / "results/reference/accuracy-wikiqa.json")
    assert md.keys() == js.keys()
    for label, row in js.items():
        assert md[label].supervision == row.supervision
        for metric, value in row.metrics.items():
            assert md[label].metrics[metric] == pytest.approx(value, abs=5e-5), (label, metric)
        assert md[label].latency["p50_ms"] == pytest.approx(row.latency["p50_ms"], abs=0.05)


def _run_record_doc(tmp_path: Path) -> tuple[Path, Path]:
    """A README whose one table reads a copy of a run record under ``tmp_path``."""
    record = tmp_path / "results/reference/word-order/wikiqa-concat-row.json"
    record.parent.mkdir(parents=True)
    record.write_bytes((REPO / "results/reference/word-order/wikiqa-concat-row.json").read_bytes())

    if "test-run-ap" not in renderers():

        @renderer("test-run-ap")
        def run_ap(records: Records) -> str:
            return f"AP@10 {records.run('wikiqa-concat-row.json').metrics['AP@10']:.4f}\n"

    doc = tmp_path / "README.md"
    doc.write_text(
        "<!-- reference: test-run-ap from results/reference/word-order/wikiqa-concat-row.json -->"
        "\nold\n<!-- /reference -->\n",
        encoding="utf-8",
    )
    return doc, record


def _reference(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["reference", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, " ".join(result.output.split())


def test_render_refuses_a_read_only_readme_and_keeps_it(tmp_path: Path) -> None:
    doc, _ = _run_record_doc(tmp_path)
    doc.chmod(0o444)
    before = doc.read_text(encoding="utf-8")
    code, out = _reference("render", "--readme", str(doc))
    assert code == 2 and f"{doc} is read-only (mode 0444)" in out
    assert doc.read_text(encoding="utf-8") == before and doc.stat().st_mode & 0o777 == 0o444
    doc.chmod(0o640)  # writable: rendered, and its mode kept
    assert _reference("render", "--readme", str(doc))[0] == 0
    assert "AP@10 0.7816" in doc.read_text(encoding="utf-8")
    assert doc.stat().st_mode & 0o777 == 0o640


def test_a_truncated_record_is_named_with_its_table(tmp_path: Path) -> None:
    doc, record = _run_record_doc(tmp_path)
    record.write_text(record.read_text(encoding="utf-8")[:300], encoding="utf-8")
    for command in ("check", "render"):
        code, out = _reference(command, "--readme", str(doc))
        assert code == 2, out
        assert f"table 'test-run-ap': record {record} is not valid JSON" in out


@pytest.mark.parametrize("text", ["[1, 2, 3]", '{"metrics": {}}'])
def test_a_record_of_another_shape_is_named(tmp_path: Path, text: str) -> None:
    doc, record = _run_record_doc(tmp_path)
    record.write_text(text, encoding="utf-8")
    for command in ("check", "render"):
        code, out = _reference(command, "--readme", str(doc))
        assert code == 2, out
        assert f"{doc} line 1: table 'test-run-ap': record {record} is not a run record (" in out
        assert "restore it or write it again" in out


def test_a_comparison_record_of_another_shape_is_named(tmp_path: Path) -> None:
    record = tmp_path / "results/reference/accuracy-wikiqa.json"
    record.parent.mkdir(parents=True)
    record.write_text("[1, 2, 3]", encoding="utf-8")
    doc = tmp_path / "results.md"
    doc.write_text(
        "x\n<!-- reference: monobert-wikiqa from results/reference/accuracy-wikiqa.json -->\n"
        "<!-- /reference -->\n",
        encoding="utf-8",
    )
    code, out = _reference("check", "--readme", str(doc))
    assert code == 2, out
    assert f"{doc} line 2: table 'monobert-wikiqa': record {record} is not a comparison" in out


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "<!-- reference: main-job-semeval16b from results/reference/none.md -->\n"
            "<!-- /reference -->\n",
            "line 3: table 'main-job-semeval16b': no record results/reference/none.md",
        ),
        (
            "<!-- reference: main-job-semeval16b from results/reference/main-job-semeval16b.md, "
            "results/reference/second.json -->\n<!-- /reference -->\n",
            "line 3: table 'main-job-semeval16b': no record results/reference/second.json",
        ),
        (
            "<!-- reference: nope from results/reference/main-job-semeval16b.md -->\n"
            "<!-- /reference -->\n",
            "line 3: no renderer 'nope'; known: ",
        ),
        (
            "<!-- reference: first from a.json -->\n| a |\n\n"
            "<!-- reference: second from b.json -->\n| b |\n<!-- /reference -->\n",
            "line 3: table 'first' has no end marker",
        ),
        ("text\n<!-- /reference -->\n", "line 4: unmatched or malformed marker"),
    ],
)
def test_every_marker_error_names_the_document_and_line(
    tmp_path: Path, body: str, message: str
) -> None:
    """The tables live in README.md and docs/*.md: a line alone does not say which."""
    (tmp_path / "results").symlink_to(REPO / "results")
    doc = tmp_path / "docs" / "page.md"
    doc.parent.mkdir()
    doc.write_text("# page\n\n" + body, encoding="utf-8")
    for command in ("check", "render"):
        code, out = _reference(command, "--readme", str(doc), "--root", str(tmp_path))
        assert code == 2, out
        assert f"error: {doc} {message}" in out


def test_a_missing_end_marker_blames_its_own_table(tmp_path: Path) -> None:
    doc = tmp_path / "README.md"
    doc.write_text(
        "<!-- reference: first from a.json -->\n| a |\n\n"
        "<!-- reference: second from b.json -->\n| b |\n<!-- /reference -->\n",
        encoding="utf-8",
    )
    code, out = _reference("check", "--readme", str(doc))
    assert code == 2
    assert "line 1: table 'first' has no end marker ('<!-- /reference -->') before the " in out
    assert "next marker on line 4" in out


def test_a_readme_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    doc = tmp_path / "README.md"
    doc.write_bytes(b"# title\n\ncaf\xe9\n")
    for command in ("check", "render"):
        code, out = _reference(command, "--readme", str(doc))
        assert code == 2 and f"{doc}: not UTF-8 text (byte 0xe9 on line 3)" in out


def test_frontier_plot_reads_the_order_tables_records(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from bench.reporting.figures import Records
    from bench.reporting.figures_order import order_frontier

    block = next(
        b
        for b in find_blocks(RESULTS_DOC.read_text(encoding="utf-8"))
        if b.name == "crossjem-order-wikiqa"
    )
    points = order_frontier(Records(block.name, block.records, REPO))
    assert points[0].speedup is None and all(p.speedup for p in points[1:])
    out = tmp_path / "frontier.png"
    code, text = _reference("frontier", "--out", str(out), "--readme", str(RESULTS_DOC))
    assert code == 0, text
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, text = _reference("frontier", "--out", str(out), "--n", "10")
    assert code == 2 and "--n must be 100 or 700" in text


def _records_of(tmp_path: Path, labels: list[str]) -> Records:
    rows = [{"label": label, "metrics": {"AP@10": i / 10}} for i, label in enumerate(labels)]
    (tmp_path / "cmp.json").write_text(json.dumps(rows))
    return Records("t", [Path("cmp.json")], tmp_path)


def test_a_pick_selects_by_ranker_and_options_not_by_the_label_text(tmp_path: Path) -> None:
    """Options in any order, values compared as a label shows them (1e-4 is "0.0001"), the
    fine-tuned flag and the exact option set count; the label's wording and order do not."""
    records = _records_of(
        tmp_path,
        [
            "crossjem (minilm-l6, teacher=T+C, loss=ce, fine-tuned)",
            "crossjem (minilm-l6, loss=ce, fine-tuned)",
            "crossjem (minilm-l6, loss=ce)",
            "colbert (minilm-l6, lr=0.0001, fine-tuned)",
        ],
    )
    chosen = pick("crossjem", True, model="minilm-l6", loss="ce", teacher="T+C")
    assert records.row("cmp.json", chosen).metrics["AP@10"] == 0.0
    assert records.row("cmp.json", chosen.but(teacher=None)).metrics["AP@10"] == 0.1
    assert records.row("cmp.json", pick("crossjem", model="minilm-l6", loss="ce")).metrics[
        "AP@10"
    ] == pytest.approx(0.2)
    assert records.row("cmp.json", pick("colbert", True, model="minilm-l6", lr=1e-4))
    with pytest.raises(ReferenceError, match=r"no rows of crossjem .*its crossjem rows: crossjem "):
        records.row("cmp.json", chosen.but(loss="bce"))


def test_a_pick_never_matches_a_row_made_on_a_subset(tmp_path: Path) -> None:
    """A row scored on the first queries only, or trained on the first train queries only, is
    not the row a table names: its figures are of other data."""
    records = _records_of(
        tmp_path,
        [
            "crossjem (minilm-l6, fine-tuned, first 60 queries)",
            "crossjem (minilm-l6, fine-tuned, trained on the first 64 queries)",
            "crossjem (minilm-l6, fine-tuned)",
            "bm25 (first 5 queries)",
        ],
    )
    assert records.row("cmp.json", pick("crossjem", True, model="minilm-l6")).metrics[
        "AP@10"
    ] == pytest.approx(0.2)
    with pytest.raises(ReferenceError, match=r"no rows of bm25 \(\) in cmp.json"):
        records.row("cmp.json", pick("bm25"))


def test_two_rows_one_pick_is_an_error(tmp_path: Path) -> None:
    records = _records_of(tmp_path, ["bm25 (k1=1.2)", "bm25"])
    assert records.row("cmp.json", pick("bm25", k1=1.2)).metrics["AP@10"] == 0.0
    doubled = _records_of(
        tmp_path, ["dpr (minilm-l6, pooling=cls, lr=0.1)", "dpr (minilm-l6, lr=0.1, pooling=cls)"]
    )
    with pytest.raises(ReferenceError, match="2 rows of dpr"):
        doubled.row("cmp.json", pick("dpr", model="minilm-l6", pooling="cls", lr=0.1))


def test_a_pick_table_renders_its_rows_from_data(tmp_path: Path) -> None:
    """A :class:`PickTable` row shows its text cells, then each column's figure of the rows its
    picks name (from the table's record or the row's own); a metric a row lacks is the missing
    mark, or an error when the column says so."""
    from bench.reporting.figures import Column, PickRow, PickTable

    rows = [
        {"label": "bm25", "supervision": "none", "metrics": {"AP@10": 0.5}, "latency": {}},
        {
            "label": "monobert (minilm-l6, fine-tuned)",
            "supervision": "labels",
            "metrics": {"AP@10": 0.625, "RR@10": 0.75},
            "latency": {"p50_ms": 1234.56},
        },
    ]
    (tmp_path / "cmp.json").write_text(json.dumps(rows))
    (tmp_path / "other.json").write_text(json.dumps([{**rows[0], "metrics": {"AP@10": 0.25}}]))
    records = Records("t", [Path("cmp.json"), Path("other.json")], tmp_path)
    mono = pick("monobert", True, model="minilm-l6")
    columns = (Column("supervision"), Column("RR@10"), Column("p50", "p50 ms"))
    table = PickTable(
        "cmp.json",
        ("ranker",),
        (*columns, Column("mono", "AP@10", of=1), Column("difference")),
        (PickRow("a", (pick("bm25"), mono)), PickRow("b", (pick("bm25"), mono), "other.json")),
    )
    with pytest.raises(ReferenceError, match=r"no rows of monobert .* in other.json"):
        table.render(records)
    table = PickTable("cmp.json", table.labels, table.columns, table.rows[:1])
    assert table.render(records).splitlines() == [
        "| ranker | supervision | RR@10 | p50 | mono | difference |",
        "|---|---|---|---|---|---|",
        "| a | none | – | – | 0.6250 | +12.50 |",
    ]
    strict = PickTable("cmp.json", ("ranker",), (Column("RR@10", missing_ok=False),), table.rows)
    with pytest.raises(KeyError, match="RR@10"):
        strict.render(records)
    mono_only = PickTable("other.json", ("x",), columns, (PickRow(("y",), mono, "cmp.json"),))
    assert mono_only.render(records).splitlines()[-1] == "| y | labels | 0.7500 | 1,234.6 |"


def test_every_reference_label_reads_back_as_written() -> None:
    """:meth:`RowKey.parse` inverts :meth:`RowKey.label` on every row the reference records
    hold (the labels bench run wrote over the project's life)."""
    from bench.results.labels import RowKey

    labels = [
        label
        for path in sorted((REPO / "results" / "reference").rglob("*"))
        if path.suffix in (".md", ".json")
        and "latency" not in path.name
        and path.parent.name not in ("latency", "scale", "plots")
        for label in _comparison_labels(path)
    ]
    assert len(labels) >= 80
    for label in labels:
        assert RowKey.parse(label).label() == label
    key = RowKey.parse(
        "crossjem (minilm-l6, loss=ce, fine-tuned, trained on the first 8 queries, first 5 queries)"
    )
    assert (key.ranker, key.options, key.fine_tuned, key.train_subset, key.subset) == (
        "crossjem",
        (("model", "minilm-l6"), ("loss", "ce")),
        True,
        8,
        5,
    )


def _comparison_labels(path: Path) -> list[str]:
    try:
        return list(read_comparison(path))
    except (ReferenceError, KeyError, TypeError, AttributeError):
        return []  # a run or latency record, not a comparison


def test_a_run_record_of_a_changed_run_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    """A kept `bench run` record scored from a run file reads while the file has the bytes
    it recorded; edited or deleted, the table would show figures of a file that no longer
    exists, so the reader refuses, naming the record and the file."""
    import hashlib

    from bench.results.records import ResultRecord

    run_file = tmp_path / "sysA" / "run.trec"
    run_file.parent.mkdir()
    run_file.write_text("q1 Q0 d1 1 2.0 sysA\n", encoding="utf-8")
    digest = hashlib.sha256(run_file.read_bytes()).hexdigest()
    record = ResultRecord(
        "runfile", "toy", "test", "external", "runfile", {"AP@10": 0.5}, {}, {}, {}, "k", {}, {},
        inputs={str(run_file): digest},
    )  # fmt: skip
    (tmp_path / "record.json").write_text(json.dumps(record.to_json()))
    assert Records("t", [Path("record.json")], tmp_path).run("record.json").metrics == {
        "AP@10": 0.5
    }
    run_file.write_text("q1 Q0 d1 1 3.0 sysA\n", encoding="utf-8")
    with pytest.raises(ReferenceError) as caught:
        Records("t", [Path("record.json")], tmp_path).run("record.json")
    said = str(caught.value)
    assert f"record {tmp_path / 'record.json'} was scored from a file that changed" in said
    assert f"{run_file} does not match its recorded checksum" in said


def test_the_precision_table_picks_each_precision_by_device_and_options(tmp_path: Path) -> None:
    """CUDA cells are the fine-tuned rows, CPU cells the rows that load that model with
    checkpoint=; the change against float32 on the same device is beside each value; a
    precision without a row is shown missing."""
    from bench.reporting.figures import Records
    from bench.reporting.figures_precision import precision_table

    head = "| Family | System | Supervision | AP@10 |\n|:---|:---|:---|---:|\n"
    rows = [
        ("monobert (minilm-l6, dtype=float32, fine-tuned)", 0.7910),
        ("monobert (minilm-l6, dtype=bfloat16, fine-tuned)", 0.7909),
        ("monobert (minilm-l6, dtype=float32, checkpoint=abc)", 0.7900),
        ("monobert (minilm-l6, dtype=int8, checkpoint=abc, runtime=onnxruntime)", 0.7788),
    ]
    body = "".join(f"| Early interaction | {label} | labels | {v:.4f} |\n" for label, v in rows)
    (tmp_path / "p.md").write_text("**x / test**\n\n" + head + body)
    got = precision_table(Records("t", [Path("p.md")], tmp_path), "p.md", ("monobert",))
    assert got.splitlines()[2] == (
        "| monobert | 0.7910 | 0.7909 (-0.0001) | – | 0.7900 | – | 0.7788 (-0.0112) |"
    )


def test_the_cpu_precision_table_has_a_column_per_int8_recipe(tmp_path: Path) -> None:
    """The CPU tables put the default int8 recipe's row (its label names no recipe) and the
    every-MatMul row (``int8_recipe=all``) in their own columns, each beside float32; another
    recipe's row is in neither."""
    from bench.reporting.figures import Records
    from bench.reporting.figures_precision import CPU_COLUMNS, precision_table

    head = "| Family | System | Supervision | AP@10 |\n|:---|:---|:---|---:|\n"
    int8 = "monobert (minilm-l6, dtype=int8, checkpoint=abc"
    rows = [
        ("monobert (minilm-l6, dtype=float32, checkpoint=abc)", 0.7946),
        (f"{int8}, runtime=onnxruntime)", 0.7945),
        (f"{int8}, int8_recipe=all, runtime=onnxruntime)", 0.7880),
        (f"{int8}, int8_recipe=ffn-float, runtime=onnxruntime)", 0.7931),
    ]
    body = "".join(f"| Early interaction | {label} | labels | {v:.4f} |\n" for label, v in rows)
    (tmp_path / "p.md").write_text("**x / test**\n\n" + head + body)
    records = Records("t", [Path("p.md")], tmp_path)
    got = precision_table(records, "p.md", ("monobert",), CPU_COLUMNS)
    assert got.splitlines()[2] == "| monobert | 0.7946 | 0.7945 (-0.0001) | 0.7880 (-0.0066) |"


_TEACHER_RECORDS = (
    "results/reference/accuracy-wikiqa.json",
    "results/reference/latency/word-order-hybrid4-row.json",
    "results/reference/word-order/wikiqa-hybrid4-row.json",
    "results/reference/word-order/teachers/wikiqa-hybrid4-row-concat.json",
    "results/reference/word-order/teachers/wikiqa-hybrid4-row-monobert-concat.json",
    "results/reference/word-order/teachers/wikiqa-hybrid4-row-2monobert-colbert.json",
    "results/reference/set-encoder/wikiqa-monobert-run.json",
)


#: the seed groups of the teacher table over seeds: monoBERT's and the reseeded students'
_TEACHER_GROUPS = (
    "seeds/test-seeds-bdd9104290f2.json",
    "seeds/test-seeds-2a80ffbb8d58.json",
    "seeds/test-seeds-acd826881eba.json",
    "seeds/test-seeds-d0363ea058e0.json",
    "seeds/test-seeds-986ecacc5420.json",
)


def _teacher_records(tmp_path: Path, concat_teacher: str | None = None) -> Records:
    """Copies of the teacher table's records under ``tmp_path``; ``concat_teacher`` rewrites the
    weights hash of the concat row's teacher."""
    for name in _TEACHER_RECORDS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((REPO / name).read_bytes())
        kept = (REPO / name).with_suffix(".perquery.tsv")
        if kept.is_file():
            (tmp_path / name).with_suffix(".perquery.tsv").write_bytes(kept.read_bytes())
    if concat_teacher is not None:
        path = tmp_path / _TEACHER_RECORDS[3]
        data = json.loads(path.read_text(encoding="utf-8"))
        data["training"]["teacher"]["weights_hash"] = concat_teacher
        path.write_text(json.dumps(data), encoding="utf-8")
    return Records("crossjem-teachers-wikiqa", [Path(n) for n in _TEACHER_RECORDS], tmp_path)


def test_the_teacher_table_rows_and_distance_to_the_aim(tmp_path: Path) -> None:
    """Each row: the targets the record says, dev of the kept epoch, test AP@10, the difference to
    monoBERT's 0.7946 with the paired test where both per-query files are kept, the difference
    to the aim (that plus one point: 0.7810 - 0.7946 + 0.01 = -0.0036) or "met", and the
    layout's measured speed-up."""
    from bench.reporting.figures_teachers import crossjem_teachers_wikiqa

    lines = crossjem_teachers_wikiqa(_teacher_records(tmp_path)).splitlines()
    assert lines[2] == (
        "| monoBERT + ColBERT (the layouts' teachers) | sigmoid(mean of 2 z-scores) | 0.7783 (6) "
        "| 0.7810 | -1.36 | – | -0.36 | 2.01x |"
    )
    cells = lines[3].split(" | ")[1:7]
    assert cells == ["sigmoid(logits)", "0.7653 (3)", "0.7636", "-3.10", "0.135", "-2.10"]
    assert lines[5].split(" | ")[1:7] == [
        "sigmoid(mean of 3 z-scores)",
        "0.7780 (5)",
        "0.7864",
        "-0.82",
        "0.616",
        "met",
    ]


def test_a_teacher_row_whose_record_had_another_teacher_is_refused(tmp_path: Path) -> None:
    from bench.reporting.figures_teachers import crossjem_teachers_wikiqa

    with pytest.raises(ReferenceError, match="teacher members are .*0123456789abcdef"):
        crossjem_teachers_wikiqa(_teacher_records(tmp_path, concat_teacher="0123456789abcdef"))


def test_the_teacher_table_over_seeds_compares_means_over_the_same_seeds() -> None:
    """A reseeded row is its group's mean ± sd against monoBERT's mean over the same seeds, not
    monoBERT's seed 0. monoBERT x 2 + ColBERT: test AP@10 (0.78635 + 0.78693 + 0.76766) / 3 =
    0.7803 against (0.79456 + 0.79046 + 0.72817) / 3 = 0.7711, +0.93 points, so the aim (within
    one point) is met; its dev is the mean of the kept epochs' (0.77795 + 0.77346 + 0.77314) / 3
    = 0.7748. monoBERT + ColBERT: (0.78098 + 0.78319 + 0.76729) / 3 = 0.7772, +0.61; dev
    (0.77828 + 0.77273 + 0.76930) / 3 = 0.7734, below the weighted teacher's mean although its
    seed 0 is above (0.77828 > 0.77795): a choice by seed 0 and by the mean differ. CROSS-JEM
    concat: test (0.76357 + 0.75376 + 0.75917) / 3 = 0.7588, -1.22 points, 0.22 short of the
    aim; dev (0.76534 + 0.77708 + 0.76921) / 3 = 0.7705. monoBERT + CROSS-JEM concat: dev
    (0.78975 + 0.78027 + 0.77205) / 3 = 0.7807, the highest mean dev, so the dev choice; test
    (0.75939 + 0.77863 + 0.75627) / 3 = 0.7648, -0.63 points: the dev-chosen row meets the aim
    on the means."""
    from bench.reporting.figures_teachers import crossjem_teachers_wikiqa_seeds

    names = [*_TEACHER_RECORDS, *(f"results/reference/{g}" for g in _TEACHER_GROUPS)]
    table = crossjem_teachers_wikiqa_seeds(
        Records("crossjem-teachers-wikiqa-seeds", [Path(n) for n in names], REPO)
    )
    rows = [[c.strip() for c in line.strip("|").split("|")][1:] for line in table.splitlines()]
    assert rows[5] == [
        "3 (0, 1, 2)",
        "0.7748 ± 0.0027",
        "0.7803 ± 0.0110",
        "0.7711 ± 0.0372",
        "+0.93",
        rows[5][5],
        "met",
        "",
    ]
    assert rows[2][:5] == [
        "3 (0, 1, 2)",
        "0.7734 ± 0.0045",
        "0.7772 ± 0.0086",
        "0.7711 ± 0.0372",
        "+0.61",
    ]
    assert rows[2][6] == "met"
    assert rows[3][:5] == [
        "3 (0, 1, 2)",
        "0.7705 ± 0.0060",
        "0.7588 ± 0.0049",
        "0.7711 ± 0.0372",
        "-1.22",
    ]
    assert rows[3][6] == "-0.22"
    assert rows[4][:5] == [
        "3 (0, 1, 2)",
        "0.7807 ± 0.0089",
        "0.7648 ± 0.0121",
        "0.7711 ± 0.0372",
        "-0.63",
    ]
    assert rows[4][6] == "met"
    assert [r[-1] for r in rows[2:]] == ["", "", "chosen", ""]


def test_the_precision_latency_table_reads_each_precision_of_one_run() -> None:
    """The --dtypes record's int8 row shows that precision's monoBERT and CROSS-JEM mean ms, not
    float32's; the peer has no int8 row; the speed-ups are those of the same precision."""
    from bench.reporting.figures_precision import LATENCY_ROWS, precision_latency

    names = sorted({f"results/reference/{name}" for _, name, _ in LATENCY_ROWS})
    lines = precision_latency(Records("precision-latency", [Path(n) for n in names], REPO))
    rows = lines.splitlines()
    assert rows[3].split(" | ")[1:5] == ["bfloat16", "317", "161", "–"]
    assert rows[4].split(" | ")[1:6] == ["float32", "2,121", "925", "2,584", "2.29x"]
    assert rows[5].split(" | ")[1:8] == [
        "int8 (ONNX Runtime)",
        "2,026",
        "890",
        "–",
        "2.28x",
        "2.18x",
        "1.96x",
    ]


def test_a_markdown_comparison_row_flagged_below_a_dev_baseline_reads_as_its_label(
    tmp_path: Path,
) -> None:
    """`bench compare` ends the label of a row whose model scored below a no-training baseline
    on dev with ‡; the reader keeps the label without it, so a pick still finds the row."""
    head = "| Family | System | Supervision | AP@10 |\n|:---|:---|:---|---:|\n"
    body = "| Early interaction | monobert (minilm-l6, fine-tuned) ‡ | labels | 0.7721 |\n"
    (tmp_path / "c.md").write_text("**x / test**\n\n" + head + body, encoding="utf-8")
    rows = read_comparison(tmp_path / "c.md")
    assert list(rows) == ["monobert (minilm-l6, fine-tuned)"]
    assert rows["monobert (minilm-l6, fine-tuned)"].metrics == {"AP@10": 0.7721}
