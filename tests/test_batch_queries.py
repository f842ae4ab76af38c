"""``bench latency --batch-queries K``: K queries packed into one pass of each ranker, the cost
per query amortised over them, for monoBERT and CROSS-JEM alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_host_reads import LISTS

from bench.latency.plan import entries_for
from bench.latency.protocol import time_parts
from rankers import create_ranker


def _rankers(model: Path, batch_queries: int) -> list[Any]:
    """monoBERT (``--monobert-batch-sizes all``) and CROSS-JEM as ``bench latency`` builds
    them for ``--batch-queries`` (pre-tokenised rows), on the tiny BERT."""
    options = {name: {"model": str(model)} for name in ("monobert", "crossjem")}
    entries = entries_for(
        ["monobert", "crossjem"],
        "wikiqa",
        12,
        batch_queries,
        batch_sizes={"monobert": ("all",)},
        options=options,
    )
    chosen = [e for e in entries if e.options.get("pretokenise")]
    assert [e.ranker for e in chosen] == ["monobert", "crossjem"]
    return [create_ranker(e.ranker, e.options) for e in chosen]


@pytest.mark.parametrize("batch_queries", [1, 3])
def test_a_call_packs_its_queries_into_one_pass(
    tiny_bert: Path, batch_queries: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each call of ``batch_queries`` lists is one upload and one pass: monoBERT's pairs of all
    the call's queries in one encoder call (batch size ``all`` = N x queries), CROSS-JEM's rows
    of all of them in one packed batch (one encoder call per length bucket). Its scores are
    those of the lists scored one by one."""
    from rankers.families import monobert
    from rankers.families.crossjem import model as crossjem_model

    uploads: list[int] = []
    for module in (monobert, crossjem_model):
        original = module.upload

        def counted(arrays: Any, device: str, _f: Any = original) -> Any:
            uploads.append(1)
            return _f(arrays, device)

        monkeypatch.setattr(module, "upload", counted)
    mono, crossjem = _rankers(tiny_bert, batch_queries)
    assert mono.cfg.batch_size == 12 * batch_queries
    assert crossjem.cfg.batch_queries == batch_queries
    calls = [LISTS[i : i + batch_queries] for i in range(0, len(LISTS), batch_queries)]
    encoder_calls: list[int] = []
    for ranker in (mono, crossjem):
        ranker.module.encoder.register_forward_hook(lambda *_: encoder_calls.append(1))
        single = [ranker.score([cl])[0] for cl in LISTS]
        for call in calls:
            uploads.clear()
            encoder_calls.clear()
            prepared = ranker.prepare_scoring(call)
            scores = ranker.score_prepared(prepared)
            assert len(uploads) == 1
            buckets = 1 if ranker is mono else len(prepared[0].buckets)
            assert len(encoder_calls) == buckets
            for got, alone in zip(scores, single[: len(call)], strict=True):
                np.testing.assert_allclose(got, alone, rtol=0, atol=1e-6)
            single = single[len(call) :]


def test_the_cost_per_query_is_the_calls_cost_over_its_queries(tiny_bert: Path) -> None:
    """The tracker of a ``--batch-queries 3`` run records 3 queries per call, so its per-query
    figures are each call's time divided by 3 (the amortised cost)."""
    rankers = _rankers(tiny_bert, 3)
    trackers = time_parts(rankers, LISTS, [("score",)] * 2, batch_queries=3, warmup=1, repeats=2)
    for tracker in (t["score"] for t in trackers):
        assert tracker.queries == [3, 3]
        summary = tracker.summary()
        per_query = np.asarray(tracker.call_s) * 1000 / 3
        assert summary.calls == 2 and summary.queries == 6
        assert summary.p50_ms == pytest.approx(float(np.percentile(per_query, 50)))
