"""Paired tests in rendered tables (bench.reporting.figures, figures_setencoder): a run record's
per-query file kept beside it is read only while it has the SHA-256 the record lists, the paired
t-test and Holm come from the project's significance code, and a table says so for a row whose
per-query file is not kept. Small hand-made records; no model is loaded."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.reporting import figures_setencoder
from bench.reporting.figures import Records, ReferenceError, p_value, paired_tests
from bench.reporting.figures_setencoder import set_encoder_relative
from bench.reporting.reference_documents import check_document, render_document

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()

#: d = 0.1, 0.2, 0.3, 0.4: paired t = 3.873 on 3 degrees of freedom, two-sided p = 0.030466
HIGH = [0.5, 0.7, 0.9, 1.0]
LOW = [0.4, 0.5, 0.6, 0.6]
P_HIGH_LOW = 0.030466291662170977


def _per_query_text(values: dict[str, list[float]]) -> str:
    names = list(values)
    lines = ["qid\t" + "\t".join(names)]
    for i in range(len(next(iter(values.values())))):
        lines.append(f"q{i}\t" + "\t".join(f"{values[m][i]:.6f}" for m in names))
    return "\n".join(lines) + "\n"


def _run(
    root: Path, name: str, label: str, values: dict[str, list[float]], **extra: object
) -> Path:
    """A `bench run` record ``results/reference/NAME`` with its per-query file beside it, the
    record listing that file's SHA-256 and the means of its values as metrics."""
    text = _per_query_text(values)
    record = {
        "ranker": label.split()[0],
        "dataset": "d",
        "split": "test",
        "family": "early",
        "label": label,
        "metrics": {m: sum(v) / len(v) for m, v in values.items()},
        "latency": {},
        "config": {},
        "run_config": {},
        "config_hash": "0" * 12,
        "data": {},
        "provenance": {},
        "files": {"perquery.tsv": hashlib.sha256(text.encode()).hexdigest()},
        **extra,
    }
    path = root / "results/reference" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record), encoding="utf-8")
    path.with_suffix(".perquery.tsv").write_text(text, encoding="utf-8")
    return path


def _document(root: Path, table: str, records: list[str]) -> Path:
    named = ", ".join(f"results/reference/{r}" for r in records)
    doc = root / "doc.md"
    doc.write_text(f"<!-- reference: {table} from {named} -->\n<!-- /reference -->\n")
    doc.write_text(render_document(doc.read_text(), root))
    return doc


def _rows(doc: Path) -> list[list[str]]:
    lines = [line for line in doc.read_text().splitlines() if line.startswith("| ")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[1:]]


def _check(doc: Path) -> tuple[int, str]:
    result = runner.invoke(app, ["reference", "check", "--readme", str(doc)])
    return result.exit_code, " ".join(result.output.split())


def test_paired_tests_are_the_projects_t_test_holm_adjusted_over_the_pairs_given() -> None:
    a = {f"q{i}": {"m": v} for i, v in enumerate(LOW)}
    b = {f"q{i}": {"m": v} for i, v in enumerate(HIGH)}
    shifted = {q: {"m": v["m"] + 0.1} for q, v in a.items()}  # a constant shift: p = 0
    one, none, same, shift = paired_tests(
        [(a, b, "m"), (None, b, "m"), (a, a, "m"), (a, shifted, "m")]
    )
    assert none is None  # a pair without a per-query file is no test and not in the family
    assert one is not None and same is not None and shift is not None
    assert (one.queries, one.delta, one.p) == (4, pytest.approx(0.25), pytest.approx(P_HIGH_LOW))
    # Holm over three: 0 x 3, 0.030466 x 2, then 1 x 1 (never below the one before)
    assert one.p_holm == pytest.approx(2 * P_HIGH_LOW) and not one.significant
    assert (same.p, same.p_holm, same.significant) == (1.0, 1.0, False)
    assert (shift.p, shift.p_holm, shift.significant) == (0.0, 0.0, True)
    assert [p_value(0.0304663), p_value(0.0004, True), p_value(None)] == ["0.030", "< 0.001†", "–"]


SEMEVAL = [
    "set-encoder/semeval16b-run.json",
    "set-encoder/semeval16b-monobert-run.json",
    "set-encoder/semeval16b-monobert-listnet-run.json",
]
#: the same-supervision monoBERT: d = 0.05, 0.15, 0.3, 0.4 against HIGH, p = 0.062772
SAME = [0.45, 0.55, 0.6, 0.6]


def _semeval(root: Path, records: list[str] = SEMEVAL) -> Path:
    """The semeval16b "where joint scoring helps" table over hand-made run records: the
    Set-Encoder, its teacher and monoBERT with its supervision."""
    label = "set-encoder (minilm-l6, fine-tuned)"
    _run(root, SEMEVAL[0], label, {"AP@10": HIGH})
    _run(root, SEMEVAL[1], "monobert (minilm-l6)", {"AP@10": LOW})
    _run(root, SEMEVAL[2], "monobert (minilm-l6, loss=listnet, fine-tuned)", {"AP@10": SAME})
    return _document(root, "joint-scoring-semeval16b", records)


_SAME_ROW = ["Set-Encoder vs monoBERT, same supervision", "seeing the other candidates"]
_TEACHER_ROW = [
    "Set-Encoder vs its teacher monoBERT (labels, ce: the supervision differs too)",
    "seeing the other candidates",
]


def test_the_joint_scoring_table_shows_the_paired_test_of_each_row(tmp_path: Path) -> None:
    doc = _semeval(tmp_path)
    # Holm over the two rows: 0.030466 x 2 = 0.061, then 0.062772 x 1, never below 0.061
    assert _rows(doc) == [
        [*_SAME_ROW, "0.7750", "0.5500", "+22.50", "4", "0.063", "0.063"],
        [*_TEACHER_ROW, "0.7750", "0.5250", "+25.00", "4", "0.030", "0.061"],
    ]
    assert "(seeing the other candidates 2 of 2)" in doc.read_text()
    assert _check(doc)[0] == 0


def test_a_row_whose_run_is_not_kept_yet_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until the same-supervision run is kept, its row says so and the family is the other row:
    unadjusted, and marked."""
    unkept = tuple(
        dataclasses.replace(d, same_supervision=None) for d in figures_setencoder.DATASETS
    )
    monkeypatch.setattr(figures_setencoder, "DATASETS", unkept)
    doc = _semeval(tmp_path, SEMEVAL[:2])
    message = "monoBERT with this supervision: no run record yet"
    assert _rows(doc) == [
        [*_SAME_ROW, "0.7750", "–", "–", "–", message, "–"],
        [*_TEACHER_ROW, "0.7750", "0.5250", "+25.00", "4", "0.030", "0.030†"],
    ]
    assert "(seeing the other candidates 1 of 2)" in doc.read_text()


def test_an_edited_per_query_file_fails_the_check_naming_it(tmp_path: Path) -> None:
    doc = _semeval(tmp_path)
    kept = tmp_path / "results/reference/set-encoder/semeval16b-monobert-run.perquery.tsv"
    kept.write_text(kept.read_text().replace("0.400000", "0.100000"))  # a better baseline
    code, out = _check(doc)
    assert code == 2, out
    assert f"{kept} was changed since its run (SHA-256" in out
    assert "semeval16b-monobert-run.json" in out
    assert "restore it from its run's perquery.tsv" in out and "render" not in out


def test_a_deleted_per_query_file_fails_the_check_naming_it(tmp_path: Path) -> None:
    """A deleted published per-query file was blamed on the record ("the record gives '–'")
    with advice to render, which would replace the published p-values: it is named, and the
    table is neither checked nor rendered without it."""
    doc = _semeval(tmp_path)
    before = doc.read_text()
    gone = tmp_path / "results/reference/set-encoder/semeval16b-run.perquery.tsv"
    gone.unlink()
    code, out = _check(doc)
    assert code == 2, out
    record = gone.with_name("semeval16b-run.json")
    assert (
        f"{gone} is missing (record {record} lists its SHA-256); the table's p-values are "
        "computed from it: restore it from its run's perquery.tsv"
    ) in out
    assert "render" not in out and "the record gives" not in out
    result = runner.invoke(app, ["reference", "render", "--readme", str(doc)])
    assert result.exit_code == 2 and str(gone) in " ".join(result.output.split())
    assert doc.read_text() == before


def test_a_per_query_file_of_a_record_without_its_hash_is_refused(tmp_path: Path) -> None:
    path = _run(tmp_path, "r.json", "monobert (minilm-l6)", {"AP@10": LOW}, files={})
    records = Records("t", [Path("results/reference/r.json")], tmp_path)
    with pytest.raises(ReferenceError, match="r.json lists no SHA-256 of it"):
        records.per_query("r.json")
    path.with_suffix(".perquery.tsv").unlink()
    assert records.per_query("r.json") is None


def test_the_dl19_transfer_table_tests_each_measure_holm_over_the_three(tmp_path: Path) -> None:
    teacher = {"nDCG@10": LOW, "RR@10": [0.5] * 4, "AP": [0.2] * 4}
    model = {"nDCG@10": HIGH, "RR@10": [0.5] * 4, "AP": [0.3] * 4}
    _run(tmp_path, "set-encoder/dl19-monobert-run.json", "monobert (minilm-l6)", teacher)
    _run(tmp_path, "set-encoder/dl19-run.json", "set-encoder (minilm-l6)", model)
    names = ["set-encoder/dl19-run.json", "set-encoder/dl19-monobert-run.json"]
    doc = _document(tmp_path, "set-encoder-transfer-dl19", names)
    assert _rows(doc) == [
        ["monobert (loss=ce, the teacher)", "0.5250", "0.5000", "0.2000"],
        ["set-encoder", "0.7750", "0.5000", "0.3000"],
        ["difference (points)", "+25.00", "+0.00", "+10.00"],
        ["p (paired t-test, 4 queries)", "0.030", "1.000", "< 0.001"],
        ["p (Holm over the three)", "0.061", "1.000", "< 0.001†"],
    ]
    assert check_document(doc.read_text(), tmp_path) == []


def _latency_row(n: int, column: str, mean: float) -> dict[str, object]:
    ranker = column.split()[0]
    return {
        "label": column,
        "ranker": ranker,
        "column": column,
        "family": "early",
        "n": n,
        "batch_queries": 1,
        "options": {},
        "weights": "",
        "dtype": "float32",
        "latency": {"mean_ms": mean, "p50_ms": mean},
        "best": True,
    }


def _latency(root: Path, name: str, n: int, means: dict[str, float]) -> None:
    record = {
        "dataset": "wikiqa",
        "split": "test",
        "created": "",
        "config": {},
        "config_hash": "0",
        "device": "cpu",
        "threads": 1,
        "batch_queries": 1,
        "blocks": [
            {
                "n": n,
                "queries": 5,
                "tokens": {},
                "repeats": 2,
                "speedup": {"measured_mean": 2.0, "predicted_flops": 2.25},
            }
        ],
        "rows": [_latency_row(n, column, mean) for column, mean in means.items()],
        "data": {},
        "provenance": {},
    }
    path = root / "results/reference/latency" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def test_the_set_encoder_latency_table_and_its_frontier_point(tmp_path: Path) -> None:
    ends = ("", " (end-to-end)")
    sizes = ((f"set-encoder-n{n}.json", n, n / 10) for n in (10, 100, 700))
    for name, n, scale in sizes:
        means = {
            f"{c}{end}": scale * base * (1.1 if end else 1.0)
            for c, base in (("monobert", 200.0), ("set-encoder", 250.0), ("crossjem", 100.0))
            for end in ends
        }
        _latency(tmp_path, name, n, means)
    names = [f"latency/set-encoder-n{n}.json" for n in (10, 100, 700)]
    doc = _document(tmp_path, "set-encoder-latency", names)
    assert _rows(doc) == [
        ["10", "5 x 2", "200 (220)", "250 (275)", "100 (110)", "1.25x (1.25x)", "2.00x (2.25x)"],
        [
            "100",
            "5 x 2",
            "2,000 (2,200)",
            "2,500 (2,750)",
            "1,000 (1,100)",
            "1.25x (1.25x)",
            "2.00x (2.25x)",
        ],
        [
            "700",
            "5 x 2",
            "14,000 (15,400)",
            "17,500 (19,250)",
            "7,000 (7,700)",
            "1.25x (1.25x)",
            "2.00x (2.25x)",
        ],
    ]
    records = Records("t", [Path("results/reference") / n for n in names], tmp_path)
    assert (
        set_encoder_relative(records, 100) == 1.25 and set_encoder_relative(records, 1000) is None
    )


def test_the_checkouts_set_encoder_frontier_point_is_its_n100_run() -> None:
    """The frontier plot places the Set-Encoder at its mean time over monoBERT's (2,051 / 1,520
    ms pre-tokenised, the record's run at N=100)."""
    names = [f"latency/set-encoder-n{n}.json" for n in (10, 100, 700)]
    records = Records("t", [Path("results/reference") / n for n in names], REPO)
    assert set_encoder_relative(records, 100) == pytest.approx(2051.1 / 1519.6, abs=1e-3)
