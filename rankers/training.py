"""List-level fine-tuning shared by the encoder rankers (monoBERT, CROSS-JEM).

Both rankers expose ``prepare(lists) -> batch`` and ``forward(batch) -> (logits (B, N), mask)``,
so one loop trains either with any loss of :mod:`rankers.losses`: AdamW, linear schedule with
warmup, gradient clipping, and the epoch with the best dev AP@10 kept (as the dense rankers do).

Targets per candidate: with ``teacher`` (a ``save()`` folder of any registered ranker), the
teacher's logits through a sigmoid - probabilities in 0-1 as the paper's teacher scores; without
it, the qrels grade divided by the split's highest grade (binary qrels stay 0/1; graded ones keep
their order, which RPL needs). Candidates without a judgement count as grade 0.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.data.model import CandidateList, Qrels, RankingSplit
from bench.metrics import build_run, evaluate
from rankers.base import Ranker, RankerError
from rankers.losses import get_loss

if TYPE_CHECKING:
    from rankers.encoders import EncoderRanker

log = logging.getLogger(__name__)

#: dev measure used to select the epoch (same as the dense rankers)
SELECTION_MEASURE = "AP@10"


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


def teacher_targets(teacher: Ranker, lists: Sequence[CandidateList]) -> list[np.ndarray]:
    """sigmoid(teacher logits): the 0-1 teacher probabilities the non-BCE losses expect."""
    return [1.0 / (1.0 + np.exp(-s.astype(np.float64))) for s in teacher.score(lists)]


def dev_score(ranker: Ranker, dev: RankingSplit | None) -> float | None:
    """Dev AP@10 with the current weights; None without a dev split."""
    if dev is None or not dev.lists:
        return None
    run = build_run(dev.lists, ranker.score(dev.lists))
    ev = evaluate(dev.qrels, run, dev.relevance_level, measures=(SELECTION_MEASURE,))
    return ev.aggregate[SELECTION_MEASURE]


def fit_lists(
    ranker: EncoderRanker,
    train: RankingSplit,
    dev: RankingSplit | None = None,
    teacher: Ranker | None = None,
) -> dict[str, Any]:
    """Fine-tune ``ranker`` in place on whole candidate lists; returns the training summary."""
    import torch
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    from bench.device import seed_everything
    from rankers.encoders import DTYPES, state_hash

    cfg = ranker.cfg
    loss_fn = get_loss(cfg.loss)
    lists = [cl for cl in train.lists if len(cl)]
    if not lists:
        raise RankerError(f"train split {train.dataset}/{train.split} has no candidate lists")
    if teacher is None and cfg.teacher:
        teacher = load_teacher(cfg.teacher, ranker.device)
    targets = teacher_targets(teacher, lists) if teacher else grade_targets(lists, train.qrels)
    source = f"teacher {teacher.describe().get('weights_hash')}" if teacher else "qrels grades"

    seed_everything(cfg.seed)
    module = ranker.module
    steps_per_epoch = math.ceil(len(lists) / cfg.train_batch_queries)
    total = steps_per_epoch * cfg.epochs
    no_decay = ("bias", "LayerNorm.weight", "LayerNorm.bias")
    named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        [
            {
                "params": [p for n, p in named if not n.endswith(no_decay)],
                "weight_decay": cfg.weight_decay,
            },
            {"params": [p for n, p in named if n.endswith(no_decay)], "weight_decay": 0.0},
        ],
        lr=cfg.lr,
    )
    scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_ratio * total), total)
    autocast = DTYPES[cfg.dtype] if ranker.device.startswith("cuda") else None

    dev_before = dev_score(ranker, dev)
    history: list[dict[str, Any]] = []
    best: tuple[float, int, dict[str, Any]] | None = None
    skipped = 0
    start = time.perf_counter()
    log.info(
        "%s fine-tuning: %d lists, %d epochs x %d steps, loss %s on %s",
        ranker.name,
        len(lists),
        cfg.epochs,
        steps_per_epoch,
        cfg.loss,
        source,
    )
    with tqdm(total=total, desc=f"{ranker.name} fit", unit="step", disable=None) as bar:
        for epoch in range(1, cfg.epochs + 1):
            order = list(range(len(lists)))
            random.Random(cfg.seed + epoch).shuffle(order)
            module.train()
            losses: list[float] = []
            for b in range(0, len(order), cfg.train_batch_queries):
                idx = order[b : b + cfg.train_batch_queries]
                batch = ranker.prepare([(lists[i].query.text, lists[i].texts) for i in idx])
                amp = (
                    torch.autocast("cuda", dtype=autocast) if autocast else contextlib.nullcontext()
                )
                with amp:
                    logits, mask = ranker.forward(batch)
                y = torch.zeros_like(logits)
                for row, i in enumerate(idx):
                    y[row, : len(targets[i])] = torch.as_tensor(targets[i], dtype=y.dtype)
                try:
                    value = loss_fn.compute(logits.float(), y, mask)
                except ValueError as exc:
                    if "no query in the batch has signal" not in str(exc):
                        raise
                    # e.g. a batch of lists without positives under ce: nothing to learn here;
                    # a whole epoch of these (binary labels under rpl) is an error below
                    skipped += len(idx)
                    bar.update(1)
                    continue
                skipped += value.skipped
                optimizer.zero_grad(set_to_none=True)
                value.loss.backward()
                torch.nn.utils.clip_grad_norm_(module.parameters(), cfg.max_grad_norm)
                optimizer.step()
                scheduler.step()
                losses.append(float(value.loss.detach()))
                bar.update(1)
                bar.set_postfix(epoch=epoch, loss=f"{losses[-1]:.4f}")
            if not losses:
                raise RankerError(
                    f"{ranker.name}: loss {cfg.loss} found no signal in any batch of "
                    f"{train.dataset}/{train.split} ({source}): {loss_fn.no_signal}"
                )
            dev_ap = dev_score(ranker, dev)
            record = {
                "epoch": epoch,
                "loss": float(np.mean(losses)),
                f"dev_{SELECTION_MEASURE}": dev_ap,
                "weights_hash": state_hash(module),
            }
            history.append(record)
            log.info("%s epoch %d: %s", ranker.name, epoch, record)
            # no dev: the last epoch wins; ties keep the earlier epoch
            if best is None or dev_ap is None or dev_ap > best[0]:
                state = {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}
                best = (dev_ap if dev_ap is not None else -math.inf, epoch, state)
    assert best is not None
    module.load_state_dict(best[2])
    module.eval()
    return {
        "epochs": cfg.epochs,
        "best_epoch": best[1],
        f"dev_{SELECTION_MEASURE}": [h[f"dev_{SELECTION_MEASURE}"] for h in history],
        f"dev_{SELECTION_MEASURE}_before": dev_before,
        "loss": [h["loss"] for h in history],
        "loss_name": cfg.loss,
        "targets": source,
        "train_queries": len(lists),
        "skipped_queries": skipped,  # summed over epochs
        "steps": total,
        "seconds": round(time.perf_counter() - start, 2),
        "epoch_weights_hash": [h["weights_hash"] for h in history],
        "weights_hash": state_hash(module),
    }
