"""Training targets of the list trainer: qrels grades, or a teacher's scores (one ranker or an
ensemble), cached per teacher, split and lists.

With a teacher (``teacher=`` or the config's ``teacher``, a ``save()`` folder of any ranker):
sigmoid(teacher logits), the 0-1 teacher probabilities the paper trains on ("target scores obtained
from a teacher"). Teacher logits of the training lists are computed once and cached (``cache_dir``,
default ``work_dir/../teacher-scores``) under the teacher's weights hash, the split checksum and the
lists' ids. Without a teacher: the qrels grade divided by the split's highest grade (binary qrels
stay 0/1; graded ones keep their order, which RPL needs); candidates without a judgement count as
grade 0. Kept apart from the loop (:mod:`rankers.fit.loop`), which trains on whatever a steps
object returns and knows nothing of teachers.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.data.model import CandidateList, Qrels, RankingSplit
from rankers.base import Ranker, RankerError
from rankers.fit.resume import digest

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

#: default teacher-score cache, beside the work directory
TEACHER_CACHE_DIR = "teacher-scores"


@dataclasses.dataclass(frozen=True)
class Targets:
    """Per-list target arrays and where they came from (recorded in the training summary)."""

    values: list[np.ndarray]
    #: "qrels grades" or "teacher <weights hash>"
    source: str
    #: teacher name, weights hash, path, score cache file; None for qrels
    teacher: dict[str, Any] | None = None


def grade_targets(lists: Sequence[CandidateList], qrels: Qrels) -> list[np.ndarray]:
    """Qrels grades scaled to [0, 1] by the highest grade, aligned with the candidates."""
    top = max((g for docs in qrels.values() for g in docs.values()), default=0)
    if top <= 0:
        raise RankerError("train qrels hold no positive grade: nothing to learn from")
    return [
        np.array(
            [max(qrels.get(cl.query.qid, {}).get(c.docid, 0), 0) / top for c in cl.candidates],
            dtype=np.float32,
        )
        for cl in lists
    ]


def load_teacher(path: str | Path, device: str) -> Ranker:
    """A ranker restored from a ``save()`` folder, whatever its kind (named in ranker.json)."""
    from rankers import create_ranker

    meta_file = Path(path) / "ranker.json"
    if not meta_file.is_file():
        raise RankerError(f"teacher {path}: no ranker.json (not a saved ranker)")
    name = json.loads(meta_file.read_text()).get("name")
    teacher = create_ranker(str(name), device=device)
    teacher.load(Path(path))
    return teacher


def sigmoid(logits: np.ndarray) -> np.ndarray:
    """Teacher logits -> the 0-1 probabilities the non-BCE losses expect (float64)."""
    return 1.0 / (1.0 + np.exp(-np.asarray(logits, dtype=np.float64)))


def teacher_id(teacher: Ranker) -> str:
    """The teacher's weights hash, or a hash of its description when it has no weights (BM25)."""
    info = teacher.describe()
    if info.get("weights_hash"):
        return str(info["weights_hash"])
    return digest(info)


def score_everywhere(teacher: Ranker, lists: Sequence[CandidateList]) -> list[np.ndarray]:
    """The teacher's logits (float64) for every list, on every process of a launch: each process
    scores its shard (balanced by candidate count, :func:`bench.core.shard.score_sharded`) and all
    get the whole, in list order - the same arrays one process makes alone."""
    from bench.core.shard import score_sharded

    scores = score_sharded(lists, [len(cl) for cl in lists], teacher.score, everywhere=True)
    assert scores is not None  # every process gets them with everywhere=True
    out = [np.asarray(s, dtype=np.float64) for s in scores]
    for cl, s in zip(lists, out, strict=True):
        if s.shape != (len(cl),):
            raise RankerError(
                f"teacher {teacher.name} returned {s.shape} scores for {len(cl)} candidates "
                f"of query {cl.query.qid}"
            )
    return out


def _read_cached(path: Path, qids: list[str], lengths: list[int]) -> list[np.ndarray] | None:
    """The cached logits of ``path`` split per list, or None (no file, or unreadable / other
    lists: logged)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if data["qids"].tolist() != qids or data["lengths"].tolist() != lengths:
                raise ValueError("lists differ from the cached ones")
            flat = data["logits"].astype(np.float64)
    except (OSError, ValueError, KeyError) as exc:
        log.warning("teacher scores: ignoring unreadable cache %s (%s)", path, exc)
        return None
    log.info("teacher scores: reusing %s", path)
    bounds = np.cumsum([0, *lengths])
    return [flat[bounds[k] : bounds[k + 1]] for k in range(len(lengths))]


def teacher_logits(
    teacher: Ranker, lists: Sequence[CandidateList], split_checksum: str, cache_dir: Path | None
) -> tuple[list[np.ndarray], Path | None]:
    """The teacher's logits for every list, read from / written to ``cache_dir`` when given.

    The cache file is named by teacher name, weights hash and a key over the split checksum and
    the lists' query and candidate ids, so another teacher, split or candidate set never reads it.
    Called on every process of a launch: the main one reads the cache and all follow it (they
    get its logits); otherwise all score their shards (:func:`score_everywhere`) and the main one
    writes the file.
    """
    from bench.core.shard import current_role, from_main

    if cache_dir is None:
        return score_everywhere(teacher, lists), None
    role = current_role()
    ident = teacher_id(teacher)
    ids = [[cl.query.qid, cl.docids] for cl in lists]
    key = digest([teacher.name, ident, split_checksum, ids])
    path = Path(cache_dir) / f"{teacher.name}-{ident}-{key}.npz"
    lengths = [len(cl) for cl in lists]
    qids = [cl.query.qid for cl in lists]
    cached = from_main(_read_cached(path, qids, lengths) if role.main else None, role)
    if cached is not None:
        return cached, path
    scores = score_everywhere(teacher, lists)
    if role.main:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:  # a file object: np.savez would append ".npz" to a name
            np.savez(
                fh,
                qids=np.array(qids),
                lengths=np.array(lengths, dtype=np.int64),
                logits=np.concatenate(scores) if scores else np.zeros(0),
                teacher=np.array(json.dumps(teacher.describe(), sort_keys=True, default=str)),
            )
        os.replace(tmp, path)
        log.info("teacher scores: wrote %s", path)
    return scores, path


#: separates the members of a teacher ensemble in the ``teacher`` option (``monobert+colbert``)
ENSEMBLE_SEPARATOR = "+"


def teacher_parts(teacher: str) -> list[str]:
    """The members of a ``teacher`` value: one name or folder, or several joined by ``+``. An
    existing folder whose name contains ``+`` stays whole."""
    if Path(teacher).exists() or ENSEMBLE_SEPARATOR not in teacher:
        return [teacher]
    parts = [p.strip() for p in teacher.split(ENSEMBLE_SEPARATOR)]
    if any(not p for p in parts):
        raise RankerError(f"teacher {teacher!r}: an empty member between '+' signs")
    return parts


def standardise(scores: np.ndarray) -> np.ndarray:
    """Per-list z-scores (mean 0, standard deviation 1; a constant list gives zeros), so that
    teachers whose logits live on different scales weigh alike in an ensemble."""
    scores = np.asarray(scores, dtype=np.float64)
    std = scores.std()
    return (scores - scores.mean()) / std if std > 0 else np.zeros_like(scores)


def ensemble_logits(members: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """The mean of the members' per-list standardised logits (one member: its logits as they
    are, so a single teacher's targets do not change)."""
    if len(members) == 1:
        return [np.asarray(s, dtype=np.float64) for s in members[0]]
    return [np.mean([standardise(m[i]) for m in members], axis=0) for i in range(len(members[0]))]


def training_targets(
    ranker: Ranker,
    train: RankingSplit,
    lists: Sequence[CandidateList],
    teacher: Ranker | None = None,
    cache_dir: Path | None = None,
) -> Targets:
    """Teacher targets (``teacher`` or the config's ``teacher``: one folder, or several joined by
    ``+`` whose per-list standardised logits are averaged), else qrels grades. The config's
    ``teacher_scores`` turns the logits into targets: ``sigmoid`` or the logits themselves."""
    path = getattr(ranker.config, "teacher", None)
    teachers: list[tuple[Ranker, str | None]] = []
    if teacher is not None:
        teachers = [(teacher, str(path) if path else None)]
    elif path:
        teachers = [(load_teacher(p, ranker.device), p) for p in teacher_parts(str(path))]
    if not teachers:
        return Targets(grade_targets(lists, train.qrels), "qrels grades")
    members: list[list[np.ndarray]] = []
    infos: list[dict[str, Any]] = []
    for t, folder in teachers:
        logits, cache = teacher_logits(t, lists, train.checksum, cache_dir)
        members.append(logits)
        infos.append(
            {
                "name": t.name,
                "weights_hash": teacher_id(t),
                "path": folder,
                "cache": str(cache) if cache else None,
            }
        )
    combined = ensemble_logits(members)
    mode = getattr(ranker.config, "teacher_scores", "sigmoid")
    values = [sigmoid(s) for s in combined] if mode == "sigmoid" else combined
    ident = ENSEMBLE_SEPARATOR.join(str(i["weights_hash"]) for i in infos)
    names = ENSEMBLE_SEPARATOR.join(str(i["name"]) for i in infos)
    info: dict[str, Any] = dict(infos[0]) if len(infos) == 1 else {"name": names, "members": infos}
    info["scores"] = mode
    source = f"teacher {ident}" + ("" if mode == "sigmoid" else f" ({mode})")
    return Targets(values, source, info)


def extend_lists(
    train: RankingSplit, lists: Sequence[CandidateList], size: int
) -> list[CandidateList]:
    """Each list grown to ``size`` candidates with BM25 negatives mined from the train split's
    whole collection (the best-scoring items not in the list and not sharing the text of one of
    its items), so the model trains on lists as large and hard as the test lists. The mined items
    have no judgement, so they count as grade 0 (or get the teacher's scores). Lists already at
    ``size`` or longer stay as they are."""
    from bench.data.model import Candidate
    from rankers.inputs.lexical import BM25Index

    collection = train.collection()
    index = BM25Index(collection)
    by_text: dict[str, set[str]] = {}
    for docid, text in collection.items():
        by_text.setdefault(text, set()).add(docid)
    out = []
    for cl in lists:
        need = size - len(cl)
        if need <= 0:
            out.append(cl)
            continue
        exclude = set(cl.docids).union(*(by_text.get(c.text, ()) for c in cl.candidates))
        mined = index.top_k(cl.query.text, need, exclude=exclude)
        extra = tuple(Candidate(docid=d, text=collection[d]) for d in mined)
        out.append(dataclasses.replace(cl, candidates=cl.candidates + extra))
    return out


def cap_lists(
    lists: Sequence[CandidateList], qrels: Qrels, cap: int, seed: int
) -> list[CandidateList]:
    """Each list cut to at most ``cap`` candidates: its positives first (grade > 0; the first
    ``cap`` of them when there are more), then a sample of its negatives drawn with ``seed`` and
    the query id, in the list's own order. A training step then holds at most
    ``train_batch_queries x cap`` items whatever the lists' lengths, and the same lists come out
    of every run (and every resume) with the same seed."""
    out = []
    for cl in lists:
        if len(cl) <= cap:
            out.append(cl)
            continue
        grades = qrels.get(cl.query.qid, {})
        positive = [i for i, c in enumerate(cl.candidates) if grades.get(c.docid, 0) > 0][:cap]
        negative = [i for i, c in enumerate(cl.candidates) if grades.get(c.docid, 0) <= 0]
        rng = np.random.default_rng([seed, zlib.crc32(cl.query.qid.encode("utf-8"))])
        drawn = rng.choice(len(negative), size=cap - len(positive), replace=False)
        keep = sorted(positive + [negative[i] for i in drawn.tolist()])
        out.append(dataclasses.replace(cl, candidates=tuple(cl.candidates[i] for i in keep)))
    return out
