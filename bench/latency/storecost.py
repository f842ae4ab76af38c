"""Indexing time and peak memory of the collection's token stores at 10^5-10^6 items.

``python -m bench.latency.storecost --collection collection.tsv --items 100000,1000000`` indexes the
first N items of a TREC ``collection.tsv`` (e.g. one ``bench datasets synth`` wrote) into each
store, every measurement in a fresh Python process so that one store's peak cannot hide
another's:

* ``flat``: :class:`rankers.inputs.tokens.ItemTokens`, what the encoder rankers index (flat int32
  ids with offsets, filled chunk by chunk);
* ``padded``: :class:`rankers.inputs.tokens.PaddedItemTokens`, the padded store it replaced (the
  test oracle), for comparison;
* ``bm25``: :class:`rankers.inputs.lexical.BM25Index`, what BM25 and the latency benchmark's first
  stage index (postings in flat arrays);
* ``rank-bm25``: rank-bm25's ``BM25Okapi`` (one Python dict of term counts per item), the index
  it replaced (the test oracle), for comparison.

Each process reports the wall time of the indexing call, the peak resident memory it added
(``ru_maxrss`` after minus before: texts and tokenizer are loaded first), and, in a second
process with :mod:`tracemalloc` on (slower, so not timed), the peak of Python-visible
allocations during the call (NumPy's included; the Rust tokenizer's are not) and what the store
holds afterwards. The machine's load average is recorded with each process, since timings on a
shared machine depend on it. One JSON record goes to ``<results root>/scale/``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.core.io import atomic_write_json
from bench.core.settings import results_root
from bench.core.writer import markdown

log = logging.getLogger(__name__)

STORES = ("flat", "padded", "bm25", "rank-bm25")


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def read_texts(collection: Path, items: int) -> list[str]:
    """The texts of the first ``items`` lines of a ``docid<TAB>text`` file."""
    texts: list[str] = []
    with open(collection, encoding="utf-8") as lines:
        for line in lines:
            texts.append(line.rstrip("\n").partition("\t")[2])
            if len(texts) == items:
                break
    if len(texts) < items:
        raise ValueError(f"{collection} holds {len(texts)} items, fewer than --items {items}")
    return texts


def _build(store: str, texts: list[str], max_len: int) -> tuple[Any, Any]:
    """(the index-building call, what it returns the store from): tokenizer loaded outside."""
    if store == "bm25":
        from rankers.inputs.lexical import BM25Index

        collection = {f"d{i}": t for i, t in enumerate(texts)}
        return (lambda: BM25Index(collection)), None
    if store == "rank-bm25":
        from rank_bm25 import BM25Okapi

        from rankers.inputs.lexical import tokenize

        return (lambda: BM25Okapi([tokenize(t) or ["\x00"] for t in texts], k1=0.9, b=0.4)), None
    from transformers import AutoTokenizer

    from rankers.inputs.tokens import ItemTokens, PaddedItemTokens
    from rankers.io.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("minilm-l6").path)
    obj = (ItemTokens if store == "flat" else PaddedItemTokens)(tokenizer, max_len)
    return (lambda: obj.add(texts)), obj


def _held(store: str, obj: Any) -> dict[str, Any]:
    """What a store holds after indexing: array bytes and held tokens (rank-bm25: unknown)."""
    if store == "flat":
        return {"array_bytes": obj.nbytes, "tokens": int(obj.ids.size)}
    if store == "padded":
        arrays = obj._arrays
        nbytes = sum(getattr(arrays, f).nbytes for f in ("ids", "lens", "distinct", "first"))
        nbytes += arrays.n_distinct.nbytes
        return {"array_bytes": nbytes, "tokens": int(arrays.lens.sum())}
    if store == "bm25":
        return {"array_bytes": obj.nbytes, "tokens": int(obj.doc_len.sum())}
    return {}


def measure_one(collection: Path, items: int, store: str, max_len: int, trace: bool) -> dict:
    """Index ``items`` texts into ``store`` in this process; the figures of one measurement."""
    texts = read_texts(collection, items)
    call, obj = _build(store, texts, max_len)
    before = _maxrss_mb()
    load = os.getloadavg()
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    built = call()
    seconds = time.perf_counter() - start
    out: dict[str, Any] = {
        "store": store,
        "items": items,
        "max_len": max_len,
        "traced": trace,
        "seconds": seconds,
        "maxrss_before_mb": before,
        "maxrss_after_mb": _maxrss_mb(),
        "load_before": load,
        "load_after": os.getloadavg(),
    }
    if trace:
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out["traced_peak_mb"] = peak / 2**20
        out["traced_held_mb"] = current / 2**20
    out["peak_added_mb"] = out["maxrss_after_mb"] - before
    out.update(_held(store, built if obj is None else obj))
    del built
    return out


def measure_stores(
    collection: Path, sizes: list[int], stores: list[str], max_len: int
) -> list[dict[str, Any]]:
    """Every (store, size) measured twice, each in a fresh process: timed, then traced."""
    rows = []
    for items in sizes:
        for store in stores:
            for trace in (False, True):
                cmd = [
                    sys.executable,
                    "-m",
                    "bench.latency.storecost",
                    "--collection",
                    str(collection),
                ]
                cmd += ["--items", str(items), "--stores", store, "--max-len", str(max_len)]
                cmd += ["--one"] + (["--trace"] if trace else [])
                log.info("%s", " ".join(cmd))
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if done.returncode:
                    raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-2000:]}")
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one line per store and size, timed and traced figures side by side."""
    header = ["items", "store", "index time (s)", "peak RSS added (MB)", "traced peak (MB)"]
    header += ["held after (MB, traced)", "tokens held", "load (1 min)"]
    timed = {(r["items"], r["store"]): r for r in rows if not r["traced"]}
    traced = {(r["items"], r["store"]): r for r in rows if r["traced"]}
    cells = []
    for key, r in timed.items():
        t = traced.get(key, {})
        cells.append(
            [f"{r['items']:,}", r["store"], f"{r['seconds']:.2f}", f"{r['peak_added_mb']:,.0f}"]
            + [f"{t.get(k, float('nan')):,.0f}" for k in ("traced_peak_mb", "traced_held_mb")]
            + [f"{r['tokens']:,}" if "tokens" in r else "-", f"{r['load_before'][0]:.2f}"]
        )
    return markdown(header, cells)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.latency.storecost", description=__doc__)
    parser.add_argument("--collection", type=Path, required=True)
    parser.add_argument("--items", default="100000,1000000", help="comma-separated sizes")
    parser.add_argument("--stores", default=",".join(STORES), help="comma-separated stores")
    parser.add_argument("--max-len", type=int, default=32, help="tokens kept per item")
    parser.add_argument("--one", action="store_true", help="measure in this process (internal)")
    parser.add_argument("--trace", action="store_true", help="with --one: tracemalloc on")
    args = parser.parse_args(argv)
    sizes = [int(v) for v in args.items.split(",")]
    stores = args.stores.split(",")
    unknown = sorted(set(stores) - set(STORES))
    if unknown:
        parser.error(f"--stores: unknown {', '.join(unknown)}; known: {', '.join(STORES)}")
    if args.one:
        print(
            json.dumps(measure_one(args.collection, sizes[0], stores[0], args.max_len, args.trace))
        )
        return
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rows = measure_stores(args.collection, sizes, stores, args.max_len)
    created = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    record = {
        "kind": "token-store-cost",
        "created": created,
        "command": " ".join(["python -m bench.latency.storecost", *(argv or sys.argv[1:])]),
        "collection": str(args.collection),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "rows": rows,
    }
    path = results_root() / "scale" / f"token-store-{created}.json"
    atomic_write_json(path, record)
    sys.stdout.write(f"{table(rows)}record: {path}\n")


if __name__ == "__main__":
    main()
