"""The Set-Encoder tables of docs/results.md: the Set-Encoder beside the monoBERT that taught it
(same supervision), per dataset, from the Set-Encoder's own `bench run` record (dev AP@10 of the
kept epoch, test figures, training time) and a `bench compare` record holding both rows (the
paired test's table).

A dataset's row appears once its records are kept in ``results/reference/set-encoder/``: add
its entry to :data:`DATASETS` and the records to the table's marker.
"""

from __future__ import annotations

from bench.core.trained import TrainingSummary
from bench.reporting.figures import MISSING, Pick, Records, fixed, pick, renderer, table

#: (dataset, the Set-Encoder's run record, the `bench compare` record, monoBERT's row there: the
#: teacher folder scored with ``checkpoint=``, whose key the label names)
DATASETS: tuple[tuple[str, str, str, Pick], ...] = (
    (
        "wikiqa",
        "set-encoder/wikiqa-run.json",
        "set-encoder/wikiqa.md",
        pick("monobert", model="minilm-l6", checkpoint="8096eb0bfed4"),
    ),
    (
        "semeval16b",
        "set-encoder/semeval16b-run.json",
        "set-encoder/semeval16b.json",
        pick("monobert", model="minilm-l6", checkpoint="4383b6188f9a"),
    ),
)


@renderer("set-encoder-accuracy")
def set_encoder_accuracy(records: Records) -> str:
    """Per dataset: monoBERT's test AP@10, the Set-Encoder's dev AP@10 (kept epoch), test
    AP@10, MAP and MRR@10, the difference in AP@10 points, and its training time."""
    rows = []
    for dataset, run, compare, mono_pick in DATASETS:
        record = records.run(run)
        mono = records.row(compare, mono_pick).metrics["AP@10"]
        training = TrainingSummary.from_json(record.training or {})
        kept = training.kept_dev_score()
        dev = f"{kept:.4f} ({training.best_epoch})" if kept is not None else MISSING
        test = record.metrics["AP@10"]
        seconds = MISSING if training.seconds is None else f"{training.seconds:,.0f}"
        rows.append(
            [
                dataset,
                fixed(mono),
                dev,
                fixed(test),
                fixed(record.metrics["AP"]),
                fixed(record.metrics["RR@10"]),
                f"{100 * (test - mono):+.2f}",
                seconds,
            ]
        )
    header = [
        "dataset",
        "monoBERT test AP@10",
        "Set-Encoder dev AP@10 (epoch)",
        "test AP@10",
        "MAP",
        "MRR@10",
        "vs monoBERT (points)",
        "training s",
    ]
    return table(header, rows)
