"""The Set-Encoder tables of docs/results.md: the Set-Encoder beside the monoBERT that taught it,
where joint scoring helps (paired tests), its DL19 zero-shot transfer and its time beside monoBERT
and CROSS-JEM.

The accuracy tables read the `bench run` records kept in ``results/reference/set-encoder/`` (dev
AP@10 of the kept epoch, test figures, training time) and the per-query file kept beside each
(``NAME.perquery.tsv``, checked against the record's SHA-256), from which the paired tests are
computed here rather than copied from a `bench compare` printout. A dataset's row appears once its
records are kept: add its entry to :data:`DATASETS` and the records to the table's marker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.core.trained import TrainingSummary
from bench.core.writer import markdown
from bench.reporting.figures import (
    ALPHA,
    MISSING,
    Paired,
    Records,
    best_row,
    fixed,
    kept_dev,
    p_value,
    paired_tests,
    renderer,
    three_figures,
    times,
)
from bench.reporting.picks import CROSSJEM_CHOSEN, LAYOUTS, WIKIQA, Pick, pick


@dataclass(frozen=True)
class SetEncoderRuns:
    """The records of one dataset's Set-Encoder comparison."""

    dataset: str
    #: the Set-Encoder's `bench run` record
    run: str
    #: one `bench compare` record holding it and its teacher, and the teacher's row there (the
    #: teacher folder scored with ``checkpoint=``, whose key the label names)
    compare: str
    teacher: Pick
    #: the teacher scored from its folder: its own run record (for the per-query values)
    teacher_run: str
    #: monoBERT trained as the Set-Encoder was (same teachers, ListNet, epochs, patience);
    #: None until its record is kept
    same_supervision: str | None = None


DATASETS: tuple[SetEncoderRuns, ...] = (
    SetEncoderRuns(
        "wikiqa",
        "set-encoder/wikiqa-run.json",
        "set-encoder/wikiqa.md",
        pick("monobert", model="minilm-l6", checkpoint="8096eb0bfed4"),
        "set-encoder/wikiqa-monobert-run.json",
        "set-encoder/wikiqa-monobert-listnet-run.json",
    ),
    SetEncoderRuns(
        "semeval16b",
        "set-encoder/semeval16b-run.json",
        "set-encoder/semeval16b.json",
        pick("monobert", model="minilm-l6", checkpoint="4383b6188f9a"),
        "set-encoder/semeval16b-monobert-run.json",
        "set-encoder/semeval16b-monobert-listnet-run.json",
    ),
)


def _dataset(name: str) -> SetEncoderRuns:
    return next(d for d in DATASETS if d.dataset == name)


@renderer("set-encoder-accuracy")
def set_encoder_accuracy(records: Records) -> str:
    """Per dataset: monoBERT's test AP@10, the Set-Encoder's dev AP@10 (kept epoch), test
    AP@10, MAP and MRR@10, the difference in AP@10 points, and its training time."""
    rows = []
    for runs in DATASETS:
        record = records.run(runs.run)
        mono = records.row(runs.compare, runs.teacher).metrics["AP@10"]
        training = TrainingSummary.from_json(record.training or {})
        dev = kept_dev(record)
        test = record.metrics["AP@10"]
        seconds = MISSING if training.seconds is None else f"{training.seconds:,.0f}"
        rows.append(
            [
                runs.dataset,
                fixed(mono),
                dev,
                fixed(test),
                fixed(record.metrics["AP"]),
                fixed(record.metrics["RR@10"]),
                f"{100 * (test - mono):+.2f}",
                seconds,
            ]
        )
    header = ["dataset", "monoBERT test AP@10", "Set-Encoder dev AP@10 (epoch)", "test AP@10"]
    header += ["MAP", "MRR@10", "vs monoBERT (points)", "training s"]
    return markdown(header, rows)


# -- where joint scoring helps ---------------------------------------------------------------------
@dataclass(frozen=True)
class Side:
    """A model or baseline of a :class:`Versus` row: its run record, or (None) its test AP@10
    from elsewhere (a comparison row) or nothing, when no run record of it is kept."""

    run: str | None
    test: float | None = None

    def test_ap(self, records: Records) -> float | None:
        return records.run(self.run).metrics["AP@10"] if self.run is not None else self.test

    def per_query(self, records: Records) -> dict[str, dict[str, float]] | None:
        return None if self.run is None else records.per_query(self.run)


@dataclass(frozen=True)
class Versus:
    """One row of a "where joint scoring helps" table: a model against a baseline on test
    AP@10; ``why`` says what is missing when a side has no run record."""

    shown: str
    question: str
    model: Side
    baseline: Side
    why: str = ""


_SEEING = "seeing the other candidates"
_SHARING = "sharing tokens (vs concat, row positions)"
CONCAT_ROW = "word-order/wikiqa-concat-row.json"


def _seeing(runs: SetEncoderRuns) -> list[Versus]:
    """The Set-Encoder against monoBERT with its supervision (when kept) and against its teacher
    (labels, cross-entropy)."""
    same = runs.same_supervision
    return [
        Versus(
            "Set-Encoder vs monoBERT, same supervision",
            _SEEING,
            Side(runs.run),
            Side(same),
            "" if same else "monoBERT with this supervision: no run record yet",
        ),
        Versus(
            "Set-Encoder vs its teacher monoBERT (labels, ce: the supervision differs too)",
            _SEEING,
            Side(runs.run),
            Side(runs.teacher_run),
        ),
    ]


def _sharing(records: Records) -> list[Versus]:
    """Every CROSS-JEM row layout of the layout table against concat with row positions (which
    shares no token), all distilled from the same monoBERT + ColBERT teachers."""
    out = []
    for shown, run, _, _ in LAYOUTS:
        if run == CONCAT_ROW:
            continue
        if run is None:  # kept only as a row of a comparison, without its run record
            test = records.row(WIKIQA, CROSSJEM_CHOSEN).metrics["AP@10"]
            out.append(
                Versus(shown, _SHARING, Side(None, test), Side(CONCAT_ROW), "no run record kept")
            )
        else:
            out.append(Versus(shown, _SHARING, Side(run), Side(CONCAT_ROW)))
    return out


def _versus_table(records: Records, rows: Sequence[Versus]) -> str:
    """The rows with their paired t-tests, Holm-adjusted over the rows of each question that
    have both per-query files, and a line saying how many that was."""
    tests: dict[int, Paired | None] = {}
    families: list[str] = list(dict.fromkeys(r.question for r in rows))
    counts = []
    for question in families:
        members = [i for i, r in enumerate(rows) if r.question == question]
        pairs = [
            (rows[i].baseline.per_query(records), rows[i].model.per_query(records), "AP@10")
            for i in members
        ]
        found = paired_tests(pairs)
        tests.update(zip(members, found, strict=True))
        counts.append(f"{question} {sum(t is not None for t in found)} of {len(members)}")
    body = []
    for i, row in enumerate(rows):
        model, baseline = row.model.test_ap(records), row.baseline.test_ap(records)
        test = tests[i]
        if test is None:
            why = row.why or "no per-query file kept"
            cells = [MISSING, why, MISSING]
        else:
            cells = [str(test.queries), p_value(test.p), p_value(test.p_holm, test.significant)]
        delta = MISSING if model is None or baseline is None else f"{100 * (model - baseline):+.2f}"
        body.append([row.shown, row.question, fixed(model), fixed(baseline), delta, *cells])
    header = ["model vs baseline", "what it measures", "model test AP@10", "baseline test AP@10"]
    header += ["difference (points)", "queries", "p (paired t-test)", "p (Holm)"]
    note = (
        "Paired t-test on test AP@10 over the queries both runs have; Holm over the rows of "
        f"each question that have both per-query files ({'; '.join(counts)}); † Holm-adjusted "
        f"p below {ALPHA:g}."
    )
    return markdown(header, body) + "\n" + note + "\n"


@renderer("joint-scoring-wikiqa")
def joint_scoring_wikiqa(records: Records) -> str:
    """wikiqa: what seeing the other candidates buys (the Set-Encoder against monoBERT) and what
    sharing tokens costs (each CROSS-JEM row layout against concat), with paired tests."""
    runs = _dataset("wikiqa")
    return _versus_table(records, [*_seeing(runs), *_sharing(records)])


@renderer("joint-scoring-semeval16b")
def joint_scoring_semeval16b(records: Records) -> str:
    """semeval16b: what seeing the other candidates buys (the Set-Encoder against monoBERT);
    its CROSS-JEM layouts were kept only as a sweep's table, without run records."""
    return _versus_table(records, _seeing(_dataset("semeval16b")))


# -- DL19 transfer ---------------------------------------------------------------------------------
DL19_RUN = "set-encoder/dl19-run.json"
DL19_TEACHER = "set-encoder/dl19-monobert-run.json"
_DL19_METRICS = ("nDCG@10", "RR@10", "AP")


@renderer("set-encoder-transfer-dl19")
def set_encoder_transfer_dl19(records: Records) -> str:
    """The wikiqa-trained Set-Encoder and its teacher monoBERT scored zero-shot on TREC DL19
    (43 queries x 100 BM25 candidates), with the paired t-test of each measure, Holm-adjusted
    over the three."""
    model, teacher = records.run(DL19_RUN), records.run(DL19_TEACHER)
    a, b = records.per_query(DL19_TEACHER), records.per_query(DL19_RUN)
    tests = paired_tests([(a, b, metric) for metric in _DL19_METRICS])
    rows = [
        ["monobert (loss=ce, the teacher)", *(fixed(teacher.metrics[m]) for m in _DL19_METRICS)],
        ["set-encoder", *(fixed(model.metrics[m]) for m in _DL19_METRICS)],
        [
            "difference (points)",
            *(f"{100 * (model.metrics[m] - teacher.metrics[m]):+.2f}" for m in _DL19_METRICS),
        ],
    ]
    queries = {t.queries for t in tests if t is not None}
    rows.append(
        [f"p (paired t-test, {', '.join(map(str, sorted(queries))) or MISSING} queries)"]
        + [p_value(t.p if t else None) for t in tests]
    )
    rows.append(
        ["p (Holm over the three)"]
        + [p_value(t.p_holm, t.significant) if t else MISSING for t in tests]
    )
    return markdown(["wikiqa-trained model (DL19 test)", *_DL19_METRICS], rows)


# -- latency ---------------------------------------------------------------------------------------
#: `bench latency -d wikiqa --rankers monobert,crossjem,set-encoder` runs, one per list size
LATENCY_RUNS = (
    "latency/set-encoder-n10.json",
    "latency/set-encoder-n100.json",
    "latency/set-encoder-n700.json",
)
_COLUMNS = ("monobert", "set-encoder", "crossjem")


_MODES = ("", " (end-to-end)")


@renderer("set-encoder-latency")
def set_encoder_latency(records: Records) -> str:
    """The Set-Encoder's time beside monoBERT's and CROSS-JEM's (the paper's union layout), each
    N from its own run: mean ms per query pre-tokenised (end to end), the Set-Encoder's time as a
    multiple of monoBERT's and CROSS-JEM's measured speed-up with the cost model's."""
    rows = []
    for name in LATENCY_RUNS:
        record = records.latency(name)
        for block in record.blocks:
            ms = {
                c: [float(best_row(record, block.n, c + m).latency["mean_ms"]) for m in _MODES]
                for c in _COLUMNS
            }
            mono, setenc = ms["monobert"], ms["set-encoder"]
            sp = block.speedup
            rows.append(
                [
                    str(block.n),
                    f"{block.queries} x {block.repeats}",
                    *(f"{three_figures(m[0])} ({three_figures(m[1])})" for m in ms.values()),
                    f"{times(setenc[0] / mono[0])} ({times(setenc[1] / mono[1])})",
                    f"{times(sp.get('measured_mean'))} ({times(sp.get('predicted_flops'))})",
                ]
            )
    header = ["N", "queries x repeats", "monoBERT ms (end to end)", "Set-Encoder ms (end to end)"]
    header += ["CROSS-JEM ms (end to end)", "Set-Encoder time / monoBERT's (end to end)"]
    header += ["CROSS-JEM speed-up (predicted)"]
    return markdown(header, rows)


def set_encoder_relative(latency: Records, n: int) -> float | None:
    """The Set-Encoder's mean time per query as a multiple of monoBERT's (pre-tokenised, each its
    fastest configuration) at list size ``n`` in the runs of :data:`LATENCY_RUNS`; None when
    none timed ``n`` (a point of the frontier plot, beside the layouts' speed-ups)."""
    for name in LATENCY_RUNS:
        record = latency.latency(name)
        if any(b.n == n for b in record.blocks):
            mono, setenc = (best_row(record, n, c).latency["mean_ms"] for c in _COLUMNS[:2])
            return float(setenc) / float(mono)
    return None
