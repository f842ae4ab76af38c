"""One training loop for every trainable ranker, and the list trainer built on it.

**The loop** (:func:`train_loop`). A ranker declares its training step through the small
:class:`Trainable` protocol - ``training_module()``, ``epoch_batches(train, epoch)``,
``batch_loss(batch, module)``, optionally ``on_epoch_start(epoch)`` and a
``training_state()``/``load_training_state()`` pair - and its settings as a :class:`LoopPlan`.
Everything around the step is shared, so it behaves the same for monoBERT, CROSS-JEM and RankT5
(:class:`ListSteps`), ColBERT (colbert-ai's objective on triples) and the dual encoders DPR and
ANCE (pairs with hard negatives): AdamW (no decay on biases and LayerNorm unless the plan says
otherwise), a linear warm-up/decay or constant schedule, gradient clipping, dev AP@10 through
``ranker.score`` after every epoch, the best epoch's weights kept, checkpoints and resume, and
the training summary.

**Accelerate.** The same loop runs on CPU, one GPU or many GPUs/nodes (``accelerate launch``):
the model, optimizer and scheduler go through ``Accelerator.prepare``; bf16/fp16 autocast follows
the list rankers' ``dtype`` on CUDA only (the others train in float32). Batches are *split*: each
process takes an equal contiguous slice of every global batch, so ``train_batch_queries`` lists
make one optimisation step whatever the process count. Each process's loss is weighted by its
share of the examples that carry signal, so the averaged gradient is the gradient of the global
batch mean - N processes train like one, up to float rounding. The list trainer pads the last,
short batch with zero-weight lists so every process gets a slice; ColBERT and the dual encoders
train in one process. Logging, dev evaluation and teacher scoring run on the main process and are
broadcast.

**Resume.** With a work directory (``ranker.work_dir``, set by the runner, or ``work_dir=``) the
full training state - model, optimizer, scheduler, every process's RNG, epoch/step, history, the
best weights so far and their dev score, and the ranker's own training state (mined negatives) -
is saved to ``work_dir/checkpoint/`` at the end of every epoch and every ``checkpoint_steps``
steps. A state is written to a temporary folder, renamed, then published by atomically replacing
``latest.json``; a crash at any point leaves the previous state usable. A later fit with the same
settings, data and targets continues from it (the epoch's batches are rebuilt from (seed, epoch)
and the trained ones skipped) and ends with the same weights as an uninterrupted run.

**Targets** (list trainer). With a teacher (``teacher=`` or the config's ``teacher``, a ``save()``
folder of any ranker): sigmoid(teacher logits), the 0-1 teacher probabilities the paper trains on
("target scores obtained from a teacher"). Teacher logits of the training lists are computed once
and cached (``cache_dir``, default ``work_dir/../teacher-scores``) under the teacher's weights
hash, the split checksum and the lists' ids. Without a teacher: the qrels grade divided by the
split's highest grade (binary qrels stay 0/1; graded ones keep their order, which RPL needs);
candidates without a judgement count as grade 0. A loss that finds no signal in any list (RPL on
binary labels) is an error before training starts. The paper's settings are the defaults of
:class:`rankers.encoders.EncoderConfig`: AdamW, lr 1e-4, linear schedule (with ``warmup_ratio``
warm-up), gradient clipping.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import logging
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from bench.data.model import CandidateList, Qrels, RankingSplit
from bench.metrics import build_run, evaluate
from bench.results import atomic_write_json
from rankers.base import Ranker, RankerError, Role, TrainingConfig
from rankers.losses import RankingLoss, get_loss

if TYPE_CHECKING:
    import torch
    from accelerate import Accelerator, PartialState
    from torch import nn

log = logging.getLogger(__name__)

#: dev measure used to select the epoch (same as the dense rankers)
SELECTION_MEASURE = "AP@10"
#: resumable training state, inside the work directory
CHECKPOINT_DIR = "checkpoint"
#: the published state of CHECKPOINT_DIR (replaced atomically)
LATEST_FILE = "latest.json"
#: default teacher-score cache, beside the work directory
TEACHER_CACHE_DIR = "teacher-scores"
#: config dtype -> Accelerate mixed precision on CUDA (CPU always trains in float32); ``auto`` is
#: resolved per GPU by :func:`mixed_precision` (its entry is the answer on Ampere or later)
MIXED_PRECISION = {"auto": "bf16", "bfloat16": "bf16", "float16": "fp16", "float32": "no"}


def mixed_precision(device: str, dtype: str) -> str:
    """Accelerate's mixed precision for option ``dtype`` on ``device``: none on CPU; ``auto`` is
    bf16 autocast only on a GPU with native bf16, else float32 (fp16 training would need loss
    scaling the user did not ask for), logged with the reason."""
    if not device.startswith("cuda"):
        return "no"
    if dtype == "auto":
        from bench.device import auto_choice

        return auto_choice(device, "training", "bf16", "no")
    return MIXED_PRECISION.get(dtype, "no")


_NO_SIGNAL = "no query in the batch has signal"


# -- targets -------------------------------------------------------------------------------------
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
    return _digest(info)


def teacher_logits(
    teacher: Ranker, lists: Sequence[CandidateList], split_checksum: str, cache_dir: Path | None
) -> tuple[list[np.ndarray], Path | None]:
    """The teacher's logits for every list, read from / written to ``cache_dir`` when given.

    The cache file is named by teacher name, weights hash and a key over the split checksum and
    the lists' query and candidate ids, so another teacher, split or candidate set never reads it.
    """
    if cache_dir is None:
        return [np.asarray(s, dtype=np.float64) for s in teacher.score(lists)], None
    ident = teacher_id(teacher)
    ids = [[cl.query.qid, cl.docids] for cl in lists]
    key = _digest([teacher.name, ident, split_checksum, ids])
    path = Path(cache_dir) / f"{teacher.name}-{ident}-{key}.npz"
    lengths = [len(cl) for cl in lists]
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as data:
                if data["qids"].tolist() != [i[0] for i in ids] or data["lengths"].tolist() != (
                    lengths
                ):
                    raise ValueError("lists differ from the cached ones")
                flat = data["logits"].astype(np.float64)
            log.info("teacher scores: reusing %s", path)
            bounds = np.cumsum([0, *lengths])
            return [flat[bounds[k] : bounds[k + 1]] for k in range(len(lists))], path
        except (OSError, ValueError, KeyError) as exc:
            log.warning("teacher scores: ignoring unreadable cache %s (%s)", path, exc)
    scores = [np.asarray(s, dtype=np.float64) for s in teacher.score(lists)]
    for cl, s in zip(lists, scores, strict=True):
        if s.shape != (len(cl),):
            raise RankerError(
                f"teacher {teacher.name} returned {s.shape} scores for {len(cl)} candidates "
                f"of query {cl.query.qid}"
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:  # a file object: np.savez would append ".npz" to a name
        np.savez(
            fh,
            qids=np.array([i[0] for i in ids]),
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
    from rankers.bm25 import BM25Index

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


def dev_per_query(ranker: Ranker, dev: RankingSplit | None) -> dict[str, float] | None:
    """Dev AP@10 of each query with the current weights; None without a dev split."""
    if dev is None or not dev.lists:
        return None
    run = build_run(dev.lists, ranker.score(dev.lists))
    ev = evaluate(dev.qrels, run, dev.relevance_level, measures=(SELECTION_MEASURE,))
    return {q: v[SELECTION_MEASURE] for q, v in ev.per_query.items()}


def dev_score(ranker: Ranker, dev: RankingSplit | None) -> float | None:
    """Dev AP@10 with the current weights (the mean over the dev queries); None without a dev
    split."""
    values = dev_per_query(ranker, dev)
    return None if values is None else (sum(values.values()) / len(values) if values else 0.0)


# -- optimisation --------------------------------------------------------------------------------
#: parameter-name endings AdamW does not decay (biases and LayerNorm, the usual BERT recipe)
NO_DECAY: tuple[str, ...] = ("bias", "LayerNorm.weight", "LayerNorm.bias")


def adamw(
    module: nn.Module,
    lr: float,
    weight_decay: float,
    total_steps: int,
    warmup_steps: int = 0,
    schedule: str = "linear",
    no_decay: tuple[str, ...] = NO_DECAY,
) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW over the trainable parameters (those ending in ``no_decay`` without weight decay)
    and its schedule: ``linear`` warm-up then linear decay to 0 at ``total_steps``, or
    ``constant`` (colbert-ai's default when it has no warm-up). An empty ``no_decay`` decays
    every weight, as colbert-ai's own trainer does."""
    import torch
    from transformers import get_constant_schedule, get_linear_schedule_with_warmup

    named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in named if not n.endswith(no_decay)], "weight_decay": weight_decay},
        {"params": [p for n, p in named if no_decay and n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=lr)
    if schedule == "constant":
        return optimizer, get_constant_schedule(optimizer)
    if schedule != "linear":
        raise RankerError(f"unknown learning-rate schedule {schedule!r} (linear or constant)")
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)


def adamw_linear(
    module: nn.Module, lr: float, weight_decay: float, warmup_ratio: float, total_steps: int
) -> tuple[torch.optim.Optimizer, Any]:
    """:func:`adamw` with the usual groups, warming up over ``warmup_ratio`` of the steps."""
    return adamw(module, lr, weight_decay, total_steps, int(warmup_ratio * total_steps))


def make_accelerator(device: str, dtype: str) -> Accelerator:
    """An Accelerator for ``device`` (cpu or cuda) with split batches and the dtype's autocast."""
    from datetime import timedelta

    import torch
    from accelerate import Accelerator, DataLoaderConfiguration
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs

    cuda = device.startswith("cuda")
    if cuda and ":" in device:
        # Accelerate places a single process on the *current* CUDA device ("cuda"): make that
        # the requested one, so `--device cuda:1` trains, scores and loads teachers on GPU 1
        torch.cuda.set_device(device)
    options: dict[str, Any] = {
        "cpu": not cuda,
        "mixed_precision": mixed_precision(device, dtype),
        # one scheduler step per optimisation step, whatever the process count (the loop cuts
        # the global batches into the processes' slices itself)
        "dataloader_config": DataLoaderConfiguration(split_batches=True),
        "kwargs_handlers": [
            # the encoders' pooler (and any head a variant skips) gets no gradient
            DistributedDataParallelKwargs(find_unused_parameters=True),
            # the main process scores the teacher and dev alone while the others wait
            InitProcessGroupKwargs(timeout=timedelta(hours=3)),
        ],
    }
    try:
        accelerator = Accelerator(**options)
    except ValueError as exc:
        # Accelerate's state is per process; a single process may switch device or precision
        if "already been initialized" not in str(exc) or PartialState().num_processes > 1:
            raise RankerError(f"cannot set up Accelerate for {device}/{dtype}: {exc}") from exc
        AcceleratorState._reset_state(reset_partial_state=True)
        accelerator = Accelerator(**options)
    placed = accelerated_device(accelerator)
    if cuda and ":" in device and placed != device:
        # under a launcher each process takes the GPU of its local rank
        raise RankerError(
            f"training asked for {device} but Accelerate placed this process on {placed}; "
            "under `accelerate launch` use --device cuda (each process takes its rank's GPU)"
        )
    return accelerator


def accelerated_device(accelerator: Accelerator) -> str:
    """The device Accelerate trains on, as ``cpu`` or ``cuda:N``: its ``cuda`` without an index
    means the current device, which the ranker must name explicitly (scoring, teachers and dev
    evaluation follow ``ranker.device``)."""
    import torch

    device = accelerator.device
    if device.type != "cuda":
        return device.type
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"cuda:{index}"


# -- data ----------------------------------------------------------------------------------------
class ListBatches:
    """Global batches of list indices, a fresh permutation per epoch (``seed + epoch``).

    The list trainer's ``epoch_batches``; :func:`train_loop` gives each process an equal slice of
    every batch. With ``pad`` the last short batch is filled up to ``batch_size`` with ``-1 - i``
    (list ``i`` again, zero weight): every process then gets a non-empty slice. The epoch is set
    through :attr:`epoch`.
    """

    def __init__(self, n_lists: int, batch_size: int, seed: int, pad: bool) -> None:
        self.n_lists = n_lists
        self.batch_size = batch_size
        self.seed = seed
        self.pad = pad
        self.epoch = 1

    def __len__(self) -> int:
        return math.ceil(self.n_lists / self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        order = list(range(self.n_lists))
        random.Random(self.seed + self.epoch).shuffle(order)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            missing = self.batch_size - len(batch) if self.pad else 0
            batch += [-1 - order[k % len(order)] for k in range(missing)]
            yield batch


@dataclasses.dataclass
class ListBatch:
    """One process's slice of a batch: the ranker's inputs and the padded targets, on the
    ranker's device (``ranker.prepare`` puts them there)."""

    inputs: Any
    targets: torch.Tensor
    #: True for the real items of real (not padding) lists
    mask: torch.Tensor
    lists: list[int]


class ListCollate:
    """List indices (``-1 - i``: padding list ``i``) -> ``ranker.prepare`` inputs + targets with
    their mask."""

    def __init__(self, ranker: Any, lists: Sequence[CandidateList], targets: Sequence[np.ndarray]):
        self.ranker = ranker
        self.lists = lists
        self.targets = targets

    def __call__(self, ids: Sequence[int]) -> ListBatch:
        rows = [i if i >= 0 else -1 - i for i in ids]
        inputs = self.ranker.prepare(
            [(self.lists[r].query.text, self.lists[r].texts) for r in rows]
        )
        targets, mask = pad_targets([self.targets[r] for r in rows], [i >= 0 for i in ids])
        device = self.ranker.device
        return ListBatch(inputs, targets.to(device), mask.to(device), list(ids))


def pad_targets(
    targets: Sequence[np.ndarray], real: Sequence[bool] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad per-list targets into (B, N_max) float32 and a mask (False on padding lists)."""
    import torch

    width = max((len(t) for t in targets), default=0)
    values = torch.zeros(len(targets), width)
    mask = torch.zeros(len(targets), width, dtype=torch.bool)
    for row, t in enumerate(targets):
        values[row, : len(t)] = torch.as_tensor(np.asarray(t), dtype=torch.float32)
        mask[row, : len(t)] = True if real is None else bool(real[row])
    return values, mask


def signal_rows(loss: RankingLoss, targets: Sequence[np.ndarray], chunk: int = 64) -> np.ndarray:
    """Per list, whether ``loss`` finds signal in its targets (on the host, ``chunk`` at once)."""
    out = [
        loss.signal_rows(*pad_targets(targets[start : start + chunk])).numpy()
        for start in range(0, len(targets), chunk)
    ]
    return np.concatenate(out) if out else np.zeros(0, dtype=bool)


def check_signal(loss: RankingLoss, targets: Sequence[np.ndarray], chunk: int = 64) -> bool:
    """True when ``loss`` finds signal in some list (its validity depends on targets only)."""
    import torch

    for start in range(0, len(targets), chunk):
        values, mask = pad_targets(targets[start : start + chunk])
        try:
            loss.compute(torch.zeros_like(values), values, mask)
        except ValueError as exc:
            if _NO_SIGNAL not in str(exc):
                raise
            continue
        return True
    return False


# -- resumable state -----------------------------------------------------------------------------
@dataclasses.dataclass
class Progress:
    """Everything besides model/optimizer/scheduler/RNG a resumed run needs (checkpointed)."""

    epochs_done: int = 0
    #: batches of the current epoch already trained
    batches_done: int = 0
    #: batches trained in all epochs
    step: int = 0
    epoch_losses: list[float] = dataclasses.field(default_factory=list)
    epoch_skipped: int = 0
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    best_epoch: int = 0
    best_score: float = -math.inf
    best_state: dict[str, Any] | None = None
    dev_before: float | None = None
    #: training seconds up to the last checkpoint, over all runs
    seconds: float = 0.0

    def state_dict(self) -> dict[str, Any]:
        state = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.best_epoch == self.epochs_done and self.batches_done == 0:
            state["best_state"] = None  # the checkpoint's model weights are the best ones
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)


def checkpoint_key(
    ranker: Ranker,
    data: dict[str, Any],
    dev: RankingSplit | None,
    processes: int,
    mixed_precision: str,
) -> str:
    """What a checkpoint must have been trained with to be resumed: the ranker's training config,
    ``data`` (whatever defines the training examples and targets), dev and the process setup."""
    return _digest(
        {
            "ranker": ranker.name,
            "config": ranker.config.to_dict(Role.TRAINING),
            **data,
            "dev": None if dev is None else [dev.checksum, sorted(dev.qrels.items())],
            "processes": processes,
            "mixed_precision": mixed_precision,
        }
    )


def list_ids(lists: Sequence[CandidateList]) -> list[list[Any]]:
    """The (qid, docids) of each list: what a checkpoint key records of the training lists."""
    return [[cl.query.qid, cl.docids] for cl in lists]


def split_key(split: RankingSplit) -> dict[str, Any]:
    """The checkpoint-key data of a trainer whose examples come from the lists and qrels (ColBERT's
    triples, the dual encoders' pairs): list ids, the split checksum, qrels and relevance level."""
    return {
        "train": list_ids(split.lists),
        "qrels": [split.checksum, sorted(split.qrels.items()), split.relevance_level],
    }


def find_checkpoint(folder: Path, key: str) -> tuple[Path, dict[str, Any]] | None:
    """The published state in ``folder`` if it was made with ``key``; None (logged) otherwise."""
    latest = folder / LATEST_FILE
    if not latest.is_file():
        return None
    try:
        meta = json.loads(latest.read_text())
        state = folder / str(meta["state"])
    except (OSError, ValueError, KeyError) as exc:
        log.warning("%s is unreadable (%s): training from scratch", latest, exc)
        return None
    if meta.get("key") != key:
        log.warning(
            "%s was saved with other settings, data or targets: training from scratch", latest
        )
        return None
    if not state.is_dir():
        log.warning("%s names %s, which is missing: training from scratch", latest, state)
        return None
    return state, meta


def wait_for_everyone(accelerator: Accelerator | PartialState) -> None:
    """A barrier across the training processes.

    Accelerate's ``wait_for_everyone`` passes ``device_ids=[local rank]`` to
    ``torch.distributed.barrier``, which then allocates its tensor on ``cuda:<rank>`` whenever
    CUDA is visible, even for a gloo (CPU) process group: two CPU processes on a one-GPU machine
    fail at the first barrier (rank 1 has no ``cuda:1``). CPU training waits with a plain
    barrier, which torch runs on the CPU for gloo groups."""
    if accelerator.num_processes <= 1:
        return
    if accelerator.device.type == "cpu":
        import torch.distributed

        torch.distributed.barrier()
    else:
        accelerator.wait_for_everyone()


def save_checkpoint(accelerator: Accelerator, folder: Path, key: str, progress: Progress) -> Path:
    """Save the full state (all processes), publish it atomically, drop older states."""
    name = f"epoch{progress.epochs_done:03d}-step{progress.step:07d}"
    tmp, final = folder / f"{name}.tmp", folder / name
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    wait_for_everyone(accelerator)
    accelerator.save_state(str(tmp))
    wait_for_everyone(accelerator)
    if accelerator.is_main_process:
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        meta = {"key": key, "state": name, "epoch": progress.epochs_done, "step": progress.step}
        atomic_write_json(folder / LATEST_FILE, meta)
        for old in folder.iterdir():
            if old.is_dir() and old.name != name:
                shutil.rmtree(old, ignore_errors=True)
        log.info("checkpoint: %s", final)
    wait_for_everyone(accelerator)
    return final


class Resumable:
    """The checkpointed progress of one training run: resume, saves, best-epoch selection.

    The bookkeeping half of :func:`train_loop`. Create it after ``accelerator.prepare`` and call
    :meth:`resume` before the first step; then :meth:`save` whenever a mid-epoch checkpoint is
    due, :meth:`end_epoch` after each epoch's dev evaluation, and :meth:`restore_best` at the
    end. Without a work directory nothing is saved.
    """

    def __init__(
        self,
        accelerator: Accelerator,
        module: nn.Module,
        work_dir: str | Path | None,
        key: str,
        name: str,
        on_checkpoint: Callable[[dict[str, int]], None] | None = None,
    ) -> None:
        self.accelerator, self.module, self.key, self.name = accelerator, module, key, name
        self.folder = Path(work_dir) / CHECKPOINT_DIR if work_dir is not None else None
        self.on_checkpoint = on_checkpoint
        self.progress = Progress()
        accelerator.register_for_checkpointing(self.progress)
        #: {"epoch", "step"} of the state this run continued from; None: from scratch
        self.resumed_from: dict[str, int] | None = None
        self._start, self._seconds_before = time.perf_counter(), 0.0

    def resume(self) -> bool:
        """Load the published state made with this key, if any (True), and start the clock."""
        found = find_checkpoint(self.folder, self.key) if self.folder is not None else None
        if found is not None:
            self.accelerator.load_state(str(found[0]))
            progress = self.progress
            if progress.best_epoch and progress.best_state is None:
                progress.best_state = _snapshot(self.module)
            self.resumed_from = {"epoch": progress.epochs_done, "step": progress.step}
            if self.accelerator.is_main_process:
                log.info("%s: resuming from %s (%s)", self.name, found[0], self.resumed_from)
        self._start, self._seconds_before = time.perf_counter(), self.progress.seconds
        return found is not None

    @property
    def seconds(self) -> float:
        """Training seconds so far, over all runs of this key."""
        return self._seconds_before + time.perf_counter() - self._start

    def save(self) -> None:
        """Publish the full state (no-op without a work directory)."""
        self.progress.seconds = self.seconds
        if self.folder is not None:
            save_checkpoint(self.accelerator, self.folder, self.key, self.progress)
            if self.on_checkpoint is not None:
                self.on_checkpoint({"epoch": self.progress.epochs_done, "step": self.progress.step})

    def end_epoch(self, epoch: int, entry: dict[str, Any], dev_score: float | None) -> None:
        """Record ``epoch``, keep its weights if its dev score is the best so far, checkpoint.

        No dev: the last epoch wins; ties keep the earlier epoch.
        """
        progress = self.progress
        progress.history.append(entry)
        if progress.best_epoch == 0 or dev_score is None or dev_score > progress.best_score:
            progress.best_epoch = epoch
            progress.best_score = dev_score if dev_score is not None else -math.inf
            progress.best_state = _snapshot(self.module)
        progress.epochs_done, progress.batches_done = epoch, 0
        progress.epoch_losses, progress.epoch_skipped = [], 0
        self.save()

    def summary(self) -> dict[str, Any]:
        """The training-summary fields every trainer reports: epochs kept, dev scores, losses,
        and where and for how long it ran."""
        progress, dev = self.progress, f"dev_{SELECTION_MEASURE}"
        return {
            "best_epoch": progress.best_epoch,
            dev: [h[dev] for h in progress.history],
            f"{dev}_before": progress.dev_before,
            "loss": [h["loss"] for h in progress.history],
            "resumed_from": self.resumed_from,
            "checkpoint": str(self.folder) if self.folder is not None else None,
            "seconds": round(self.progress.seconds, 2),
        }

    def restore_best(self) -> None:
        """Load the best epoch's weights into the module (eval mode) and stop the clock."""
        self.progress.seconds = self.seconds
        if self.progress.best_state is None:
            raise RankerError(f"{self.name}: training ended without a finished epoch")
        self.module.load_state_dict(self.progress.best_state)
        self.module.eval()


# -- the loop ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BatchLoss:
    """One process's loss for its slice of a step, with what the loop needs to combine slices.

    ``loss`` is the mean over this slice's examples that carry signal; ``used`` counts them and
    ``real`` counts the slice's real (not padding) examples. The loop weights each process's loss
    by its share of ``used`` so the averaged gradient is the global batch mean, and skips the
    optimizer step when no process has signal. A plain tensor from ``batch_loss`` means every
    example counts (``used = real = 1``: the weight is then exactly 1 in one process).
    """

    loss: torch.Tensor
    used: int
    real: int


@runtime_checkable
class Trainable(Protocol):
    """The training step a ranker declares; :func:`train_loop` owns everything around it.

    In the manner of lightning-ir's one training step with a loss hook: the ranker says what
    module is trained, which batches an epoch has and what one batch's loss is; the loop does
    the optimiser, schedule, Accelerate, dev scoring, best-epoch selection, checkpoints and
    resume the same way for every ranker. ``epoch_batches`` must depend on (seed, epoch) only,
    so a resumed run sees the same batches and skips the ones already trained. Optional hooks,
    looked up by name: ``on_epoch_start(epoch)`` before a fresh (not resumed mid-way) epoch, and
    ``training_state()``/``load_training_state(state)`` for state the ranker keeps across epochs
    (the dual encoders' mined negatives), saved with every checkpoint.
    """

    def training_module(self) -> nn.Module:
        """The module the optimiser trains and Accelerate prepares (loaded if need be)."""
        ...

    def epoch_batches(self, train: RankingSplit, epoch: int) -> Sequence[Any]:
        """Epoch ``epoch``'s global batches, in order (a function of the seed and the epoch)."""
        ...

    def batch_loss(self, batch: Any, module: nn.Module) -> torch.Tensor | BatchLoss:
        """The loss of one batch (this process's slice of it) through ``module``, the prepared
        module (a DDP wrapper under several processes: gradients sync only through it)."""
        ...


@dataclasses.dataclass(frozen=True)
class LoopPlan:
    """A trainer's settings for :func:`train_loop`, read from its config by the ranker."""

    epochs: int
    lr: float
    weight_decay: float
    max_grad_norm: float
    seed: int
    #: ``linear`` (warm-up, then decay to 0) or ``constant``
    schedule: str = "linear"
    #: warm-up as a share of all steps (``warmup_steps`` wins when set)
    warmup_ratio: float = 0.0
    warmup_steps: int | None = None
    #: parameter-name endings without weight decay (empty: decay everything)
    no_decay: tuple[str, ...] = NO_DECAY
    #: also checkpoint every N steps (0: at epoch ends only)
    checkpoint_steps: int = 0
    #: stop after this many steps in all (None: every epoch)
    max_steps: int | None = None
    #: at least this many optimizer steps: more epochs when the train set is small (0: off)
    min_steps: int = 0
    #: stop after this many epochs without a better dev score (0: run every epoch)
    patience: int = 0
    #: what defines the training examples and targets, for the checkpoint key
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: one line for the log: what is trained on what
    describe: str = ""
    #: False: refuse to run under several processes (the trainer has no slicing of its own)
    distributed: bool = False

    @classmethod
    def of(cls, cfg: TrainingConfig, **settings: Any) -> LoopPlan:
        """A plan from the options every trainable config shares (:class:`TrainingConfig`:
        epochs, lr, weight_decay, max_grad_norm, seed, min_steps, patience) and its
        checkpoint_steps if it has that option, then ``settings``."""
        shared = ("epochs", "lr", "weight_decay", "max_grad_norm", "seed", "min_steps", "patience")
        plan: dict[str, Any] = {name: getattr(cfg, name) for name in shared}
        plan["checkpoint_steps"] = int(getattr(cfg, "checkpoint_steps", 0) or 0)
        return cls(**{**plan, **settings})


def planned_epochs(plan: LoopPlan, steps_per_epoch: int) -> int:
    """``plan.epochs``, raised so that at least ``plan.min_steps`` optimizer steps are taken.

    Why: with a few dozen train queries, 3 epochs are a few dozen steps, too few to move a
    pre-trained encoder off its starting point; the dev split (with ``patience``) then picks the
    epoch, so the extra epochs cost time but cannot select a worse one on dev."""
    if plan.min_steps <= 0 or steps_per_epoch <= 0:
        return plan.epochs
    return max(plan.epochs, math.ceil(plan.min_steps / steps_per_epoch))


def out_of_patience(plan: LoopPlan, progress: Progress, has_dev: bool) -> bool:
    """Whether ``plan.patience`` epochs have passed without a better dev score (early stop)."""
    if plan.patience <= 0 or not has_dev or progress.best_epoch == 0:
        return False
    return progress.epochs_done - progress.best_epoch >= plan.patience


def train_loop(
    ranker: Ranker,
    steps: Trainable,
    train_split: RankingSplit,
    dev: RankingSplit | None,
    plan: LoopPlan,
    *,
    accelerator: Accelerator | None = None,
    work_dir: str | Path | None = None,
    on_checkpoint: Callable[[dict[str, int]], None] | None = None,
) -> dict[str, Any]:
    """Train ``steps`` (often ``ranker`` itself) in place; returns the shared training summary.

    One loop for every trainable ranker: seed, AdamW and schedule, ``accelerator.prepare``,
    resume from ``work_dir``'s checkpoint, then per epoch ``on_epoch_start``, the steps (each
    process takes an equal contiguous slice of every global batch, as Accelerate's split
    batches do), checkpoints every ``plan.checkpoint_steps`` steps, dev AP@10 through
    ``ranker.score`` on the main process and the epoch-end checkpoint; at the end the best
    epoch's weights are restored. Without ``accelerator``, one is made in float32 on the
    ranker's device. ``on_checkpoint`` is called on every process after each published
    checkpoint with ``{"epoch", "step"}``.
    """
    from accelerate.utils import broadcast_object_list, gather_object

    from bench.device import seed_everything
    from bench.progress import progress_bar
    from rankers.models import state_hash

    if not isinstance(steps, Trainable):
        raise RankerError(
            f"{ranker.name}: {type(steps).__name__} lacks training_module, epoch_batches or "
            "batch_loss, so the training loop cannot drive it"
        )
    if accelerator is None:
        accelerator = make_accelerator(ranker.device, "float32")
    main, world = accelerator.is_main_process, accelerator.num_processes
    if world > 1 and not plan.distributed:
        raise RankerError(
            f"{ranker.name}: fine-tuning runs in one process; start it without a launcher"
        )

    def on_main(compute: Callable[[], Any]) -> Any:
        """Run on the main process only; every process gets the result."""
        return broadcast_object_list([compute() if main else None])[0]

    seed_everything(plan.seed + accelerator.process_index)
    module = steps.training_module()
    steps_per_epoch = len(steps.epoch_batches(train_split, 1))
    epochs = planned_epochs(plan, steps_per_epoch)
    if epochs != plan.epochs and main:
        log.info(
            "%s: %d epochs x %d steps is below min_steps=%d, so training runs %d epochs "
            "(the dev split picks the one kept%s)",
            ranker.name,
            plan.epochs,
            steps_per_epoch,
            plan.min_steps,
            epochs,
            f"; patience {plan.patience}" if plan.patience else "",
        )
    total = steps_per_epoch * epochs
    if plan.max_steps is not None:
        total = min(total, plan.max_steps)
    warmup = plan.warmup_steps if plan.warmup_steps is not None else int(plan.warmup_ratio * total)
    optimizer, scheduler = adamw(
        module, plan.lr, plan.weight_decay, total, warmup, plan.schedule, plan.no_decay
    )
    model, optimizer, scheduler = accelerator.prepare(module, optimizer, scheduler)
    if accelerator.unwrap_model(model) is not module:
        raise RankerError(f"{ranker.name}: Accelerate returned another module than it was given")
    key = checkpoint_key(ranker, plan.data, dev, world, accelerator.mixed_precision)
    work = work_dir if work_dir is not None else ranker.work_dir
    run = Resumable(accelerator, module, work, key, ranker.name, on_checkpoint)
    if callable(getattr(steps, "training_state", None)):
        # after Progress, so every checkpoint holds them in the same order
        accelerator.register_for_checkpointing(_HookState(steps))
    progress = run.progress
    if not run.resume():
        progress.dev_before = on_main(lambda: dev_score(ranker, dev))
    if main:
        log.info(
            "%s fine-tuning: %s; %d epochs x %d steps (%d in all), %d process(es), "
            "mixed precision %s",
            ranker.name,
            plan.describe,
            epochs,
            steps_per_epoch,
            total,
            world,
            accelerator.mixed_precision,
        )
    on_epoch_start = getattr(steps, "on_epoch_start", None)
    every = plan.checkpoint_steps
    bar = progress_bar(total, f"{ranker.name} fit", "step", initial=progress.step, enabled=main)
    with bar:
        for epoch in range(progress.epochs_done + 1, epochs + 1):
            if progress.step >= total:
                break
            if out_of_patience(plan, progress, dev is not None):
                if main:
                    log.info(
                        "%s: no better dev %s for %d epochs (best: epoch %d), stopping early",
                        ranker.name,
                        SELECTION_MEASURE,
                        plan.patience,
                        progress.best_epoch,
                    )
                break
            if progress.batches_done == 0 and on_epoch_start is not None:
                on_epoch_start(epoch)
            batches = steps.epoch_batches(train_split, epoch)
            model.train()
            optimizer.zero_grad(set_to_none=True)
            for batch in batches[progress.batches_done :]:
                if progress.step >= total:
                    break
                result = steps.batch_loss(_slice(batch, accelerator), model)
                pending, used, real = _backward(accelerator, result)
                if used:
                    accelerator.clip_grad_norm_(model.parameters(), plan.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    loss = float(pending)  # the step's one host read, after the optimiser step
                    progress.epoch_losses.append(loss)
                optimizer.zero_grad(set_to_none=True)
                progress.epoch_skipped += real - used
                progress.batches_done += 1
                progress.step += 1
                bar.update(1)
                if used:
                    bar.set_postfix(epoch=epoch, loss=f"{loss:.4f}")
                due = every and progress.step % every == 0
                if due and progress.batches_done < len(batches) and progress.step < total:
                    run.save()
            module.eval()

            def record(epoch: int = epoch) -> dict[str, Any]:
                return {
                    "epoch": epoch,
                    "loss": float(np.mean(progress.epoch_losses)),
                    f"dev_{SELECTION_MEASURE}": dev_score(ranker, dev),
                    "skipped_queries": progress.epoch_skipped,
                    "steps": progress.step,
                    "weights_hash": state_hash(module),
                }

            entry = on_main(record)
            if main:
                log.info("%s epoch %d: %s", ranker.name, epoch, entry)
            run.end_epoch(epoch, entry, entry[f"dev_{SELECTION_MEASURE}"])

    # drops the mixed-precision forward wrapper: scoring casts weights to its own dtype
    accelerator.unwrap_model(model, keep_fp32_wrapper=False)
    run.restore_best()
    accelerator.free_memory()
    final_hash = state_hash(module)
    if len(set(gather_object([final_hash]))) > 1:
        raise RankerError(f"{ranker.name}: training processes ended with different weights")
    history = progress.history
    return {
        "epochs": len(history),
        "epochs_planned": epochs,
        "stopped_early": len(history) < epochs and progress.step < total,
        "steps": progress.step,
        "steps_planned": total,
        **run.summary(),
        "optimizer": {
            "name": "AdamW",
            "lr": plan.lr,
            "weight_decay": plan.weight_decay,
            "schedule": plan.schedule,
            "warmup_steps": warmup,
            "max_grad_norm": plan.max_grad_norm,
        },
        "skipped_queries": sum(h["skipped_queries"] for h in history),  # summed over epochs
        "processes": world,
        "mixed_precision": accelerator.mixed_precision,
        "epoch_weights_hash": [h["weights_hash"] for h in history],
        "weights_hash": final_hash,
    }


class _HookState:
    """A ranker's ``training_state``/``load_training_state`` under the names Accelerate's
    checkpointing calls (a ranker's own ``state_dict`` would read like its weights)."""

    def __init__(self, steps: Any) -> None:
        self.steps = steps

    def state_dict(self) -> dict[str, Any]:
        return dict(self.steps.training_state())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps.load_training_state(state)


def _slice(batch: Any, accelerator: Accelerator) -> Any:
    """This process's equal, contiguous part of a global batch (the whole batch in one)."""
    world = accelerator.num_processes
    if world == 1:
        return batch
    size = len(batch) // world
    if size * world != len(batch):
        raise RankerError(f"a batch of {len(batch)} does not split into {world} equal slices")
    return batch[size * accelerator.process_index : size * (accelerator.process_index + 1)]


def _backward(
    accelerator: Accelerator, result: torch.Tensor | BatchLoss
) -> tuple[torch.Tensor | float, int, int]:
    """Backward of one slice's loss; returns the global batch loss, examples used and real.

    Each process's loss is scaled by ``used * world / used_all``: DDP averages gradients over the
    processes, so the result is the gradient of the mean over all examples with signal. The
    counts are host integers; in one process the loss stays on the device (a detached tensor the
    loop reads once, after the optimiser step), so nothing here waits for the device. Several
    processes gather the counts and losses in one tensor, read once (the step's only read).
    """
    import torch

    if not isinstance(result, BatchLoss):
        result = BatchLoss(result, 1, 1)
    local, used = result.loss, result.used
    if accelerator.num_processes == 1:
        accelerator.backward(local * (1.0 if used else 0.0))
        return local.detach(), used, result.real
    stats = torch.zeros((1, 3), dtype=torch.float64, device=local.device)
    stats[0, 0], stats[0, 2] = used, result.real
    stats[0, 1] = local.detach().double() * used
    used_all, loss_sum, real_all = accelerator.gather(stats).sum(dim=0).tolist()
    weight = used * accelerator.num_processes / used_all if used_all else 0.0
    accelerator.backward(local * weight)
    return (loss_sum / used_all if used_all else 0.0), int(used_all), int(real_all)


# -- the list trainer ----------------------------------------------------------------------------
class ListSteps:
    """The :class:`Trainable` of the list rankers (monoBERT, CROSS-JEM, RankT5): their
    ``prepare(lists)`` and ``forward(batch) -> (logits, mask)`` with any loss of
    :mod:`rankers.losses` on whole candidate lists and fixed targets."""

    def __init__(
        self,
        ranker: Any,
        lists: Sequence[CandidateList],
        targets: Targets,
        loss_fn: RankingLoss,
        processes: int,
    ) -> None:
        cfg = ranker.cfg
        self.ranker, self.loss_fn = ranker, loss_fn
        self.collate = ListCollate(ranker, lists, targets.values)
        # several processes: the last, short batch is padded with zero-weight lists
        self.batches = ListBatches(len(lists), cfg.train_batch_queries, cfg.seed, processes > 1)
        # which lists carry signal, from the host targets once (range checked there too): a
        # step's loss then needs no read of device values to count them
        self.signal = signal_rows(loss_fn, targets.values)

    def training_module(self) -> nn.Module:
        return self.ranker.module

    def epoch_batches(self, train: RankingSplit, epoch: int) -> list[list[int]]:
        self.batches.epoch = epoch
        return list(self.batches)

    def batch_loss(self, batch: list[int], module: nn.Module) -> BatchLoss:
        inputs = self.collate(batch)
        forward = _forward(self.ranker, module, self.ranker.module)
        logits, mask = forward(inputs.inputs)
        if logits.shape != inputs.targets.shape:
            raise RankerError(
                f"forward returned logits of shape {tuple(logits.shape)} for targets of shape "
                f"{tuple(inputs.targets.shape)}"
            )
        real = sum(1 for i in batch if i >= 0)
        used = sum(int(self.signal[i]) for i in batch if i >= 0)
        if not used:
            # e.g. only lists without positives under ce: this slice adds nothing, but still
            # takes part in the backward pass (DDP reduces gradients of every process together)
            return BatchLoss(logits.sum() * 0.0, 0, real)
        # the forward mask marks each list's items, as the targets' mask does: same validity
        value = self.loss_fn.compute(logits.float(), inputs.targets, mask & inputs.mask, used)
        return BatchLoss(value.loss, value.used, real)


def fit_lists(
    ranker: Any,
    train: RankingSplit,
    dev: RankingSplit | None = None,
    teacher: Ranker | None = None,
    *,
    work_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    on_checkpoint: Callable[[dict[str, int]], None] | None = None,
) -> dict[str, Any]:
    """Fine-tune ``ranker`` in place on whole candidate lists; returns the training summary.

    ``work_dir`` (default ``ranker.work_dir``) holds the resumable checkpoint; ``cache_dir``
    (default ``work_dir/../teacher-scores``) the teacher scores. ``on_checkpoint`` is called on
    every process after each published checkpoint with ``{"epoch", "step"}``.
    """
    from accelerate.utils import broadcast_object_list

    cfg = ranker.cfg
    loss_fn = get_loss(cfg.loss)
    lists = [cl for cl in train.lists if len(cl)]
    if not lists:
        raise RankerError(f"train split {train.dataset}/{train.split} has no candidate lists")
    given = sum(len(cl) for cl in lists)
    size = int(getattr(cfg, "train_list_size", 0) or 0)
    if size:
        lists = extend_lists(train, lists, size)
        log.info(
            "%s: train lists grown to %d items with BM25 negatives: %.1f -> %.1f items a list",
            ranker.name,
            size,
            given / len(lists),
            sum(len(cl) for cl in lists) / len(lists),
        )
    if work_dir is None:
        work_dir = getattr(ranker, "work_dir", None)
    work = Path(work_dir) if work_dir is not None else None
    if cache_dir is None and work is not None:
        cache_dir = work.parent / TEACHER_CACHE_DIR

    accelerator = make_accelerator(ranker.device, cfg.dtype)
    world = accelerator.num_processes
    if cfg.train_batch_queries % world:
        raise RankerError(
            f"{ranker.name}: train_batch_queries={cfg.train_batch_queries} must be a multiple of "
            f"the {world} training processes (each takes an equal slice of a batch)"
        )
    # under torchrun on CPU Accelerate says "cpu:0"; keep the plain name the rest of the code uses
    ranker.device = accelerated_device(accelerator)

    path = Path(cache_dir) if cache_dir is not None else None
    targets: Targets = broadcast_object_list(
        [
            training_targets(ranker, train, lists, teacher, path)
            if accelerator.is_main_process
            else None
        ]
    )[0]
    if not check_signal(loss_fn, targets.values):
        raise RankerError(
            f"{ranker.name}: loss {cfg.loss} finds no signal in any list of "
            f"{train.dataset}/{train.split} ({targets.source}): {loss_fn.no_signal}"
        )
    target_hash = hashlib.sha256()
    for t in targets.values:
        target_hash.update(np.asarray(t, dtype=np.float64).tobytes())
    plan = LoopPlan.of(
        cfg,
        warmup_ratio=cfg.warmup_ratio,
        data={"train": list_ids(lists), "targets": [targets.source, target_hash.hexdigest()]},
        describe=(
            f"{len(lists)} lists, {cfg.train_batch_queries} a step, loss {cfg.loss} on "
            f"{targets.source}"
        ),
        distributed=True,
    )
    steps = ListSteps(ranker, lists, targets, loss_fn, world)
    summary = train_loop(
        ranker,
        steps,
        train,
        dev,
        plan,
        accelerator=accelerator,
        work_dir=work,
        on_checkpoint=on_checkpoint,
    )
    return {
        **summary,
        "loss_name": cfg.loss,
        "targets": targets.source,
        "teacher": targets.teacher,
        "train_queries": len(lists),
        "train_items": sum(len(cl) for cl in lists),
        "train_items_given": given,
        "train_batch_queries": cfg.train_batch_queries,
    }


def _forward(ranker: Any, model: nn.Module, module: nn.Module) -> Callable[[Any], Any]:
    """``ranker.forward`` through the prepared model: DDP only syncs gradients of calls to it."""
    if model is module:  # one process: prepare() returned the module itself
        return ranker.forward
    if "module" not in inspect.signature(ranker.forward).parameters:
        raise RankerError(
            f"{ranker.name}: forward(batch) takes no module= argument, so it cannot run through "
            "the distributed wrapper; train it in one process"
        )
    return functools.partial(ranker.forward, module=model)


def _snapshot(module: nn.Module) -> dict[str, Any]:
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


def _digest(data: Any) -> str:
    """First 16 hex of the SHA-256 of ``data`` as canonical JSON."""
    text = json.dumps(data, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
