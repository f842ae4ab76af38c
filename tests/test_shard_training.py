"""Scoring inside training, sharded over a launch's processes: teacher scores
and dev scores made by 2 gloo processes, each scoring only its shard, equal the one-process
values exactly, and the teacher-score cache is written once (by the main process) and then
read by all.

BM25 stands in for the teacher and the trained ranker: what is tested is the split, the gather
and the cache decision, which do not depend on the ranker; it makes the test fast.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import numpy as np
import torch.multiprocessing as mp

from rankers import create_ranker
from tests.toydata import gold_split


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class CountingBM25:
    """A BM25 ranker (indexed on ``split``) that counts the lists it is asked to score."""

    def __init__(self, split: Any) -> None:
        self.inner = create_ranker("bm25")
        self.inner.index(split)
        self.name = self.inner.name
        self.scored = 0

    def score(self, lists: Any) -> Any:
        self.scored += len(lists)
        return self.inner.score(lists)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


def _values(cache: Path) -> dict[str, Any]:
    """Teacher logits (twice: computed, then from the cache) and dev values in this process."""
    from rankers.fit.loop import dev_score, sharded_dev_per_query
    from rankers.fit.targets import teacher_logits

    train, dev = gold_split("train", 1, n=9), gold_split("dev", 2, n=7)
    teacher = CountingBM25(train)
    first, path = teacher_logits(teacher, train.lists, train.checksum, cache)  # type: ignore[arg-type]
    scored_first = teacher.scored
    again, _ = teacher_logits(teacher, train.lists, train.checksum, cache)  # type: ignore[arg-type]
    ranker = CountingBM25(dev)
    return {
        "first": [a.tolist() for a in first],
        "again": [a.tolist() for a in again],
        "scored_first": scored_first,
        "scored_again": teacher.scored - scored_first,
        "file": path is not None and path.is_file(),
        "dev": dev_score(ranker, dev),  # type: ignore[arg-type]
        "per_query": sharded_dev_per_query(ranker, dev),  # type: ignore[arg-type]
        "dev_scored": ranker.scored,
    }


def _worker(rank: int, world: int, port: int, cache: str, queue: mp.Queue) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        queue.put((rank, _values(Path(cache))))
    finally:
        dist.destroy_process_group()


def test_teacher_and_dev_scores_of_two_processes_equal_one_process(tmp_path: Path) -> None:
    one = _values(tmp_path / "one")
    assert one["scored_first"] == 9 and one["scored_again"] == 0 and one["file"]
    assert one["dev_scored"] == 14  # dev_score and sharded_dev_per_query: 7 lists each
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.start_processes(
        _worker,
        args=(2, _free_port(), str(tmp_path / "two"), queue),
        nprocs=2,
        start_method="spawn",
    )
    got = dict(queue.get(timeout=60) for _ in range(2))
    for rank in (0, 1):
        # every process gets the whole teacher logits, bit for bit the one-process values
        assert got[rank]["first"] == one["first"] and got[rank]["again"] == one["again"]
        assert got[rank]["dev"] == one["dev"]  # every process gets the dev score
    # each scored its shard only, together the 9 lists once; the cache then served both
    assert sorted(got[r]["scored_first"] for r in (0, 1)) == [4, 5]
    assert got[0]["scored_again"] == got[1]["scored_again"] == 0
    assert got[0]["dev_scored"] + got[1]["dev_scored"] == 14
    assert 0 < got[1]["dev_scored"] < 14
    # the main process evaluates the per-query dev values; the other gets None
    assert got[0]["per_query"] == one["per_query"] and got[1]["per_query"] is None
    # one cache file, written by the main process, the same bytes as the one-process file
    (two_file,) = (tmp_path / "two").glob("*.npz")
    (one_file,) = (tmp_path / "one").glob("*.npz")
    with np.load(one_file) as a, np.load(two_file) as b:
        assert a["logits"].tobytes() == b["logits"].tobytes()
        assert a["qids"].tolist() == b["qids"].tolist()
