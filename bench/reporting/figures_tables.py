"""The README's rendered result tables: one registered function or :class:`PickTable` per table
(:mod:`bench.reporting.figures`).

Each states which rows of which record it shows, in the README's words; every figure comes from
the record. To add a table: write a function here decorated with ``@renderer("name")`` (or a
:class:`PickTable`, registered with ``renderer("name")(table.render)``) and put ``<!-- reference:
name from RECORD[, RECORD] -->`` ... ``<!-- /reference -->`` where it belongs in the README, then
run ``bench reference render``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bench.core.writer import markdown
from bench.latency.records import LatencyRecord
from bench.reporting.checks import MetricExpectation
from bench.reporting.figures import (
    Column,
    PickRow,
    PickTable,
    Records,
    best_row,
    fixed,
    percent,
    renderer,
    three_figures,
    times,
)
from bench.reporting.picks import (
    COLBERT,
    CROSSJEM_10,
    CROSSJEM_CHOSEN,
    CROSSJEM_WIKIQA,
    MAIN_JOB,
    MONOBERT_10,
    MONOBERT_BCE_T,
    MONOBERT_CE,
    RANKT5,
    SEMEVAL,
    WIKIQA,
    WIKIQA_PEERS,
    pick,
)

#: the metric columns of the accuracy tables
_METRICS = tuple(Column(m) for m in ("AP@10", "RR@10", "nDCG@10"))


# -- CI regression ---------------------------------------------------------------------------------
@renderer("ci-regression")
def ci_regression(records: Records) -> str:
    """Every metric entry of the CI regression's expected-value file, as `bench check` reads it."""
    rows = []
    for entry in records.expected("results/expected/ci.yaml"):
        if not isinstance(entry, MetricExpectation):
            continue
        sel = entry.selector
        settings = ", ".join(f"{k}={v}" for k, v in sel.options) or "defaults"
        where, value = f"{sel.dataset} / {sel.split or 'any'}", fixed(entry.expected)
        rows.append([where, sel.ranker, settings, entry.metric, value, f"{entry.tolerance:g}"])
    header = ["dataset / split", "ranker", "settings", "metric", "expected", "tolerance"]
    return markdown(header, rows)


# -- semeval16b ------------------------------------------------------------------------------------
#: the main job's table (`make demo` fell back to semeval16b): each ranker with its settings
#: file's semeval16b settings, which its label then leaves out (monoBERT and CROSS-JEM 10 epochs,
#: CROSS-JEM with item positions)
MAIN_JOB_TABLE = PickTable(
    MAIN_JOB,
    ("ranker",),
    (Column("supervision"), *_METRICS, Column("p50 ms/query", "p50 ms")),
    (
        PickRow("bm25", pick("bm25")),
        PickRow("monobert (fine-tuned, 10 epochs)", pick("monobert", True, model="minilm-l6")),
        PickRow(
            "colbert (MiniLM-L6 + 128-d projection, fine-tuned)",
            pick("colbert", True, model="minilm-l6"),
        ),
        PickRow("dpr (zero-shot)", pick("dpr", model="minilm-l6")),
        PickRow("dpr (fine-tuned)", pick("dpr", True, model="minilm-l6")),
        PickRow("ance (fine-tuned)", pick("ance", True, model="minilm-l6")),
        PickRow(
            "rankt5 (MiniLM-L6 encoder-decoder, not T5, fine-tuned)",
            pick("rankt5", True, model="minilm-l6-encdec"),
        ),
        PickRow("crossjem (item positions, 10 epochs)", pick("crossjem", True, model="minilm-l6")),
    ),
)
renderer("main-job-semeval16b")(MAIN_JOB_TABLE.render)


def _versus(first: str, second: str) -> tuple[Column, ...]:
    """Test AP@10 of a row's two picks and the second's gain over the first."""
    return (
        Column(first, "AP@10", missing_ok=False),
        Column(second, "AP@10", of=1, missing_ok=False),
        Column("difference"),
    )


#: monoBERT and CROSS-JEM trained on the same supervision, test AP@10
SAME_SUPERVISION_SEMEVAL16B = PickTable(
    SEMEVAL,
    ("supervision",),
    _versus("monobert", "crossjem (item positions)"),
    (
        PickRow("labels (monoBERT: BCE; CROSS-JEM: ListNet on labels)", (MONOBERT_10, CROSSJEM_10)),
        PickRow(
            "teacher monoBERT (the 10-epoch one above), ListNet on sigmoid targets",
            (
                MONOBERT_10.but(loss="listnet", teacher="monobert"),
                CROSSJEM_10.but(teacher="monobert"),
            ),
        ),
    ),
)
renderer("same-supervision-semeval16b")(SAME_SUPERVISION_SEMEVAL16B.render)

#: (shown, the loss a label names: None for the default, ListNet)
_LOSSES = (
    ("BCE", "bce"),
    ("CE", "ce"),
    ("ListNet (default)", None),
    ("PL (Plackett-Luce of the teacher's order)", "pl"),
    ("RPL (as written)", "rpl"),
    ("RPL-self (each item in its own set)", "rpl-self"),
)
#: `bench ablate -d semeval16b --what loss` with the chosen settings
LOSS_ABLATION_SEMEVAL16B = PickTable(
    SEMEVAL,
    ("crossjem loss",),
    (Column("supervision"), *_METRICS),
    tuple(
        PickRow(shown, CROSSJEM_10.but(loss=loss, teacher="monobert")) for shown, loss in _LOSSES
    ),
)
renderer("loss-ablation-semeval16b")(LOSS_ABLATION_SEMEVAL16B.render)


_SWEPT = ("dev AP@10", "test AP@10", "epoch", "train s")


@renderer("sweeps-semeval16b")
def sweeps_semeval16b(records: Records) -> str:
    """The semeval16b sweeps, as `bench sweep` wrote them into the settings files."""
    rows = []
    for ranker in ("monobert", "crossjem"):
        sweep = records.sweep(f"rankers/configs/{ranker}.yaml", "semeval16b")
        keys = [k for k in sweep.chosen if len({r[k] for r in sweep.rows}) > 1]
        for row in sweep.rows:
            settings = ", ".join(f"{k}={row[k]}" for k in keys)
            if all(row[k] == v for k, v in sweep.chosen.items()):
                settings = f"**{settings}** (chosen)"
            rows.append([ranker, settings, *(row[k] for k in _SWEPT)])
    header = ["ranker", "settings", "dev AP@10", "test AP@10", "epoch kept", "train s"]
    return markdown(header, rows)


# -- wikiqa ----------------------------------------------------------------------------------------
#: `bench ablate -d wikiqa --what loss --set teacher=T+C`, test split
LOSS_ABLATION_WIKIQA = PickTable(
    WIKIQA,
    ("crossjem loss",),
    (Column("test AP@10", "AP@10"), *_METRICS[1:]),
    tuple(
        PickRow(
            shown.split(" (")[0] + (" (default)" if not loss else ""),
            CROSSJEM_WIKIQA.but(loss=loss, teacher="T+C"),
        )
        for shown, loss in _LOSSES
    ),
)
renderer("loss-ablation-wikiqa")(LOSS_ABLATION_WIKIQA.render)

#: monoBERT and CROSS-JEM on wikiqa under the same supervision, test AP@10
SAME_SUPERVISION_WIKIQA = PickTable(
    WIKIQA,
    ("supervision",),
    _versus("monobert", "crossjem"),
    (
        PickRow(
            "labels, listwise softmax cross-entropy", (MONOBERT_CE, CROSSJEM_WIKIQA.but(loss="ce"))
        ),
        PickRow(
            "teacher: the ce monoBERT, ListNet on sigmoid targets",
            (MONOBERT_CE.but(loss="listnet", teacher="M"), CROSSJEM_WIKIQA.but(teacher="M")),
        ),
        PickRow(
            "chosen settings of each (monoBERT on labels; CROSS-JEM from monoBERT+ColBERT, "
            "6 epochs)",
            (MONOBERT_CE, CROSSJEM_CHOSEN),
        ),
    ),
)
renderer("same-supervision-wikiqa")(SAME_SUPERVISION_WIKIQA.render)

#: ColBERT and RankT5 beside monoBERT on both datasets (test)
COLBERT_RANKT5 = PickTable(
    WIKIQA_PEERS,
    ("dataset / test", "ranker"),
    tuple(Column(m) for m in ("AP@10", "AP", "RR@10", "nDCG@10")),
    (
        PickRow(("wikiqa", "colbert"), COLBERT),
        PickRow(("wikiqa", "rankt5 (MiniLM-L6 enc-dec)"), RANKT5),
        PickRow(("wikiqa", "rankt5, 1 epoch (the schedule before)"), RANKT5.but(epochs=None)),
        PickRow(
            ("wikiqa", "monobert bce, 3 epochs (the setting then)"), MONOBERT_BCE_T, record=WIKIQA
        ),
        PickRow(
            ("wikiqa", "monobert `loss=ce` (wikiqa's setting now, above)"), MONOBERT_CE, WIKIQA
        ),
        PickRow(("semeval16b", "colbert"), COLBERT, SEMEVAL),
        PickRow(("semeval16b", "rankt5 (MiniLM-L6 enc-dec)"), RANKT5, SEMEVAL),
        PickRow(
            ("semeval16b", "monobert (10 epochs, the main job's)"), MONOBERT_10, record=SEMEVAL
        ),
    ),
)
renderer("colbert-rankt5")(COLBERT_RANKT5.render)


# -- latency ---------------------------------------------------------------------------------------
LATENCY_RUN1 = "latency/test-bq1-20261123T130903-6b85d4859203.json"
LATENCY_RUN2 = "latency/test-bq1-20261123T134959-04490266a3e4.json"
_MODES = (("pre-tokenised", ""), ("end-to-end", " (end-to-end)"))


def _speedup(record: LatencyRecord, n: int, suffix: str) -> dict[str, float]:
    found = record.block(n).speedup
    return dict(found.get("end_to_end") or {}) if suffix else dict(found)


def _batch_sizes(runs: Sequence[tuple[str, LatencyRecord]]) -> str:
    """Which monoBERT batch size was fastest in each cell, from the records' best rows."""
    sizes = {
        (name, mode, b.n): best_row(record, b.n, "monobert" + suffix).options.get("batch_size")
        for name, record in runs
        for b in record.blocks
        for mode, suffix in _MODES
    }
    values = list(sizes.values())
    usual = max(values, key=values.count)
    others = [
        f"{name} {mode} N={n}: {size}" for (name, mode, n), size in sizes.items() if size != usual
    ]
    return f"monoBERT is its fastest batch size in each cell (p50): {usual}" + (
        f", except {'; '.join(others)}." if others else " in every cell."
    )


def _same_or_both(texts: Iterable[str]) -> str:
    """One text when the runs agree (the same lists give the same prediction), else each run's."""
    found = list(dict.fromkeys(texts))
    return " / ".join(found)


@renderer("latency-cpu-runs")
def latency_cpu_runs(records: Records) -> str:
    """Run 1 and run 2 of the CPU latency benchmark side by side (p50 ms, speed-ups)."""
    runs = (("run 1", records.latency(LATENCY_RUN1)), ("run 2", records.latency(LATENCY_RUN2)))
    rows = []
    for block in runs[0][1].blocks:
        for mode, suffix in _MODES:
            p50 = {
                col: " / ".join(
                    f"{best_row(rec, block.n, col + suffix).latency['p50_ms']:,.1f}"
                    for _, rec in runs
                )
                for col in ("monobert", "crossjem")
            }
            sp = [_speedup(rec, block.n, suffix) for _, rec in runs]
            rows.append(
                [
                    str(block.n),
                    mode,
                    p50["monobert"],
                    p50["crossjem"],
                    *(times(s.get("measured_mean")) for s in sp),
                    _same_or_both(times(s.get("predicted_flops")) for s in sp),
                    " / ".join(percent(s.get("fraction_of_prediction")) for s in sp),
                    _same_or_both(
                        f"{rec.block(block.n).tokens['compression_mean']:.1f}" for _, rec in runs
                    ),
                ]
            )
    header = ["N", "mode", "monoBERT (run 1 / run 2)", "CROSS-JEM (run 1 / run 2)"]
    header += ["speed-up run 1", "speed-up run 2", "predicted", "% of prediction (run 1 / run 2)"]
    header += ["C"]
    return markdown(header, rows) + "\n" + _batch_sizes(runs) + "\n"


@renderer("latency-cpu-breakdown")
def latency_cpu_breakdown(records: Records) -> str:
    """Host step / model alone / whole call per run, N and scoring mode (p50 ms)."""
    runs = (("run 1", records.latency(LATENCY_RUN1)), ("run 2", records.latency(LATENCY_RUN2)))
    header = ["run", "N"] + [
        f"{name} {mode}" for name in ("monoBERT", "CROSS-JEM") for mode, _ in _MODES
    ]
    rows = []
    for name, record in runs:
        for block in record.blocks:
            cells = []
            for col in ("monobert", "crossjem"):
                for _, suffix in _MODES:
                    row = best_row(record, block.n, col + suffix)
                    parts = (row.tokenisation or {}, row.model_only or {}, row.latency)
                    cells.append(" / ".join(three_figures(p.get("p50_ms")) for p in parts))
            rows.append([name, str(block.n), *cells])
    return markdown(header, rows)


LATENCY_ALL = "latency/test-bq1-20261123T131514-789f939cf355.json"
LATENCY_BERT_BASE = "latency/test-bq1-20261123T132220-6cb41be6fb00.json"
_ALL_COLUMNS = ("bm25", "dpr", "colbert", "monobert", "st-crossencoder", "rankt5", "crossjem")


@renderer("latency-all-rankers")
def latency_all_rankers(records: Records) -> str:
    """Every ranker at N=30 and 100, then monoBERT and CROSS-JEM at BERT-base size (p50 ms)."""
    runs = (
        ("all rankers, MiniLM-L6", records.latency(LATENCY_ALL)),
        (
            "BERT-base size (12 x 768, random weights, timing only)",
            records.latency(LATENCY_BERT_BASE),
        ),
    )
    rows = []
    for name, record in runs:
        for block in record.blocks:
            p50 = {  # the columns timed in this record
                r.column: three_figures(r.latency["p50_ms"])
                for r in record.rows
                if r.n == block.n and r.best
            }
            cells = []
            for col in _ALL_COLUMNS:
                if col == "dpr":
                    pair = [p50.get(f"dpr ({m})", "") for m in ("precomputed", "query time")]
                    cells.append(" / ".join(pair) if all(pair) else "")
                else:
                    cells.append(p50.get(col, ""))
            sp = block.speedup
            cells.append(f"{times(sp.get('measured_mean'))} ({times(sp.get('predicted_flops'))})")
            rows.append([name, str(block.n), *cells])
    header = ["run (CPU, float32, p50 ms per query)", "N", "bm25", "dpr (precomputed / query time)"]
    header += ["colbert", "monoBERT", "st-crossencoder", "rankt5", "CROSS-JEM"]
    header += ["speed-up (predicted)"]
    return markdown(header, rows)


LATENCY_THROUGHPUT = "latency/test-bq8-20261123T131851-246109f457e7.json"


@renderer("latency-throughput")
def latency_throughput(records: Records) -> str:
    """Pairs per second with 8 queries per call."""
    record = records.latency(LATENCY_THROUGHPUT)
    rows = []
    for block in record.blocks:
        rates = {
            col: best_row(record, block.n, col).latency["candidates_per_s"]
            for col in ("monobert", "crossjem")
        }
        rows.append(
            [
                str(block.n),
                str(record.batch_queries),
                f"{rates['monobert']:,.0f}",
                f"{rates['crossjem']:,.0f}",
                times(block.speedup.get("measured_mean")),
            ]
        )
    header = ["N", "queries per call", "monoBERT pairs/s", "CROSS-JEM pairs/s", "speed-up"]
    return markdown(header, rows)


# -- wikiqa single runs ----------------------------------------------------------------------------
_TEST_AP = (Column("test AP@10", "AP@10", missing_ok=False),)
#: monoBERT's wikiqa runs (`bench run -r monobert -d wikiqa --set ...`), test AP@10
MONOBERT_WIKIQA = PickTable(
    WIKIQA,
    ("settings", "supervision"),
    _TEST_AP,
    (
        PickRow(("bce, 3 epochs (the default before)", "labels"), MONOBERT_BCE_T),
        PickRow(
            ("bce, `max_item_len=64`", "labels"),
            pick("monobert", True, model="minilm-l6", max_item_len=64),
        ),
        PickRow(("**`loss=ce`** (listwise softmax cross-entropy; chosen)", "labels"), MONOBERT_CE),
        PickRow(
            ("`--teacher M --loss listnet` (M: the ce monoBERT)", "teacher monobert"),
            MONOBERT_CE.but(loss="listnet", teacher="M"),
        ),
    ),
)
renderer("monobert-wikiqa")(MONOBERT_WIKIQA.render)

#: CROSS-JEM's wikiqa runs (`bench run -r crossjem -d wikiqa ...`), test AP@10; the first with
#: the settings of the time
CROSSJEM_WIKIQA_RUNS = PickTable(
    WIKIQA,
    ("settings", "supervision"),
    _TEST_AP,
    (
        PickRow(
            ("default of the time (`--teacher T`)", "teacher monobert (bce)"),
            pick("crossjem", True, model="minilm-l6", union_len=272, teacher="monobert"),
        ),
        PickRow(
            ("`--teacher T --set item_positions=true --set epochs=4`", "teacher monobert (bce)"),
            CROSSJEM_WIKIQA.but(teacher="T", epochs=4, item_positions=True),
        ),
        PickRow(
            ("`--teacher T+C`", "teacher monobert (bce) + colbert"),
            CROSSJEM_WIKIQA.but(teacher="T+C"),
        ),
        PickRow(
            ("`--teacher M` (the ce monoBERT)", "teacher monobert (ce)"),
            CROSSJEM_WIKIQA.but(teacher="M"),
        ),
        PickRow(
            (
                "`--teacher M+C --set epochs=6 --set patience=2` (chosen)",
                "teacher monobert (ce) + colbert",
            ),
            CROSSJEM_CHOSEN,
        ),
        PickRow(("`--set teacher=none --set loss=ce`", "labels"), CROSSJEM_WIKIQA.but(loss="ce")),
    ),
)
renderer("crossjem-wikiqa")(CROSSJEM_WIKIQA_RUNS.render)


LATENCY_BEFORE = "latency/test-bq1-20261121T210447-fefade94bdcd.json"


@renderer("latency-host-step")
def latency_host_step(records: Records) -> str:
    """CROSS-JEM's host step at N=700 before the array-based inputs and in both CPU runs after."""
    before = records.latency(LATENCY_BEFORE)
    runs = (("run 1", records.latency(LATENCY_RUN1)), ("run 2", records.latency(LATENCY_RUN2)))
    n = 700
    old = best_row(before, n, "crossjem")
    rows = [
        [
            f"before ({before.created[:10]}; Python inputs)",
            "items tokenised in the call",
            three_figures((old.tokenisation or {}).get("p50_ms")),
        ]
    ]
    for name, record in runs:
        for mode, suffix in _MODES:
            row = best_row(record, n, "crossjem" + suffix)
            rows.append(
                [
                    f"now, {name}",
                    row.mode or mode,
                    three_figures((row.tokenisation or {}).get("p50_ms")),
                ]
            )
    return markdown(["CROSS-JEM at N=700", "scoring mode", "host step, p50 ms per query"], rows)
