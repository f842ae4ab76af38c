"""Per-query ranking losses over padded lists: BCE, softmax CE, ListNet (top-1), the paper's RPL
as written, RPL repaired so that every item gets a gradient (``rpl-self``), and the Plackett-Luce
likelihood of the targets' ordering (``pl``, ListMLE with ties) that the paper's lemma describes.

Every loss takes ``logits`` and ``targets`` of shape ``(B, N)`` and a boolean ``mask`` (True for
real items) and returns the mean over queries of a per-query loss. Padded entries are replaced
before any arithmetic, so garbage (even inf/nan) in padding reaches neither the value nor the
gradient.

Queries that carry no signal for a loss are left out of the mean and counted (:class:`LossValue`):
an all-padding row for every loss, a row whose targets sum to zero for ``ce``, a row whose RPL
targets sum to zero for ``rpl``. When *no* query of a batch has signal the loss raises
``ValueError``: silently returning zero would train nothing.

Targets: ``bce`` needs values in [0, 1]; ``ce`` and ``rpl`` need non-negative values (they are
normalised into distributions). Teacher logits, which can be negative, must be turned into
probabilities first - ``torch.sigmoid(teacher_logits)`` - as the paper trains on teacher scores in
the 0-1 range; min-shifting per query is not used because it would zero the lowest item's target
and make the targets depend on which other items are in the list. ``listnet`` takes any real targets
(it applies a softmax to them).

RPL as written in the paper (eq. L^RPL): with ``L_j = {k : y_k < y_j}``, ``s_j = sum_{k in L_j}
f_k`` and ``t_j = sum_{k in L_j} y_k`` normalised, the loss is ``-sum_j t_j log softmax(s)_j``.
Note what this literal form implies: the item with the highest target is in no ``L_j``, so its logit
gets no gradient, and the optimum raises the logits of *lower* items (``s_j - s_{j+1}`` is the logit
of the item just below ``j``). It is implemented exactly as written; see tests/test_losses.py.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

#: per-query loss (B,) and which queries carry signal (B,) bool
PerQuery = Callable[["Tensor", "Tensor", "Tensor"], "tuple[Tensor, Tensor]"]


@dataclasses.dataclass(frozen=True)
class LossValue:
    """A batch loss (mean over the queries that carry signal) and how many were left out."""

    loss: Tensor
    used: int
    skipped: int


@dataclasses.dataclass(frozen=True)
class RankingLoss:
    """A named per-query loss; calling it returns the batch mean as a scalar tensor."""

    name: str
    per_query: PerQuery
    #: what to tell the user when no query of a batch carries signal
    no_signal: str

    def compute(
        self, logits: Tensor, targets: Tensor, mask: Tensor | None = None, used: int | None = None
    ) -> LossValue:
        """The batch loss. ``used``: how many queries carry signal, when the caller knows it from
        the host copy of the targets (:meth:`signal_rows`), which also checked their range: then
        nothing here reads a value back from the device (no host-device sync in a training
        step); else it is counted here."""
        import torch

        if logits.shape != targets.shape:
            raise ValueError(
                f"loss {self.name}: logits {tuple(logits.shape)} and targets "
                f"{tuple(targets.shape)} differ in shape"
            )
        if logits.dim() == 1:
            logits, targets = logits[None], targets[None]
            mask = None if mask is None else mask[None]
        if mask is None:
            mask = torch.ones_like(logits, dtype=torch.bool)
        mask = mask.to(device=logits.device, dtype=torch.bool)
        if mask.shape != logits.shape:
            raise ValueError(f"loss {self.name}: mask {tuple(mask.shape)} != {tuple(logits.shape)}")
        # neutralise padding first: nan/inf there must not reach values or gradients
        logits = logits.masked_fill(~mask, 0.0)
        targets = targets.to(logits.dtype).masked_fill(~mask, 0.0)
        if used is None:
            losses, valid = self.per_query(logits, targets, mask)
            used = int(valid.sum())
        else:
            token = _CHECKED.set(True)
            try:
                losses, valid = self.per_query(logits, targets, mask)
            finally:
                _CHECKED.reset(token)
        if used == 0:
            raise ValueError(
                f"loss {self.name}: no query in the batch has signal; {self.no_signal}"
            )
        loss = losses.masked_fill(~valid, 0.0).sum() / used
        return LossValue(loss=loss, used=used, skipped=int(valid.numel()) - used)

    def __call__(self, logits: Tensor, targets: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.compute(logits, targets, mask).loss

    def signal_rows(self, targets: Tensor, mask: Tensor) -> Tensor:
        """(B,) bool: which rows (queries) carry signal. Validity depends on the targets and mask
        only (any logits give the same answer), so a trainer computes it once on the host and
        checks the targets' range there."""
        import torch

        targets = targets.to(torch.float32).masked_fill(~mask, 0.0)
        return self.per_query(torch.zeros_like(targets), targets, mask)[1]


#: set while :meth:`RankingLoss.compute` runs on targets whose range the caller checked on the host
_CHECKED: contextvars.ContextVar[bool] = contextvars.ContextVar("targets_checked", default=False)


def _check_range(name: str, targets: Tensor, mask: Tensor, low: float, high: float | None) -> None:
    if _CHECKED.get():  # checked on the host copy: reading device values here would sync
        return
    vals = targets[mask]
    if vals.numel() == 0:
        return
    lo, hi = float(vals.min()), float(vals.max())
    if lo < low or (high is not None and hi > high):
        want = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(
            f"loss {name}: targets must be {want}, got min {lo:.4g} max {hi:.4g}; "
            "pass teacher probabilities (torch.sigmoid of teacher logits), not raw logits"
        )


def _masked_log_softmax(x: Tensor, mask: Tensor) -> Tensor:
    """log softmax over the valid entries of each row; padded entries get 0 (not -inf)."""
    log_p = x.masked_fill(~mask, float("-inf")).log_softmax(dim=-1)
    return log_p.masked_fill(~mask, 0.0)


def _cross_entropy(dist: Tensor, scores: Tensor, mask: Tensor) -> Tensor:
    """-sum_j dist_j log softmax(scores)_j per row (dist already zero on padding)."""
    return -(dist * _masked_log_softmax(scores, mask)).sum(dim=-1)


def _normalise(weights: Tensor) -> tuple[Tensor, Tensor]:
    """Rows divided by their sum; rows summing to zero stay zero and are flagged invalid."""
    total = weights.sum(dim=-1, keepdim=True)
    valid = total.squeeze(-1) > 0
    return weights / total.clamp_min(1e-30), valid


def bce_per_query(logits: Tensor, targets: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Sigmoid cross-entropy, mean over a query's valid items."""
    import torch.nn.functional as F

    _check_range("bce", targets, mask, 0.0, 1.0)
    per_item = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    count = mask.sum(dim=-1)
    losses = (per_item * mask).sum(dim=-1) / count.clamp_min(1)
    return losses, count > 0


def ce_per_query(logits: Tensor, targets: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Softmax cross-entropy against the targets normalised to sum to one."""
    _check_range("ce", targets, mask, 0.0, None)
    dist, valid = _normalise(targets)
    return _cross_entropy(dist, logits, mask), valid


def listnet_per_query(logits: Tensor, targets: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """ListNet top-1: cross-entropy between softmax(targets) and softmax(logits)."""
    dist = _masked_log_softmax(targets, mask).exp() * mask
    return _cross_entropy(dist, logits, mask), mask.any(dim=-1)


def _lower(targets: Tensor, mask: Tensor) -> Tensor:
    """``lower[b, j, k]``: items j and k are valid and k has a strictly lower target than j."""
    return (targets[:, None, :] < targets[:, :, None]) & mask[:, None, :] & mask[:, :, None]


def _rpl(
    name: str, sets: Tensor, logits: Tensor, targets: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    """-sum_j t_j log softmax(s)_j with s_j, t_j the sums of f and y over ``sets[:, j]``."""
    _check_range(name, targets, mask, 0.0, None)
    sets = sets.to(logits.dtype)
    s = (sets @ logits[..., None]).squeeze(-1)
    t, valid = _normalise((sets @ targets[..., None]).squeeze(-1))
    return _cross_entropy(t, s, mask), valid


def rpl_per_query(logits: Tensor, targets: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Ranking Probability Loss, paper eq. L^RPL (see the module docstring)."""
    return _rpl("rpl", _lower(targets, mask), logits, targets, mask)


def rpl_self_per_query(logits: Tensor, targets: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """The smallest repair of RPL that gives every item a gradient: each item's set holds the
    item itself besides the lower ones, ``L_j = {k : y_k < y_j} + {j}``. The top item's ``s``
    then contains its own logit; the rest of the written formula is unchanged."""
    import torch

    own = torch.diag_embed(mask)
    return _rpl("rpl-self", _lower(targets, mask) | own, logits, targets, mask)


def plackett_luce_per_query(logits: Tensor, targets: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Negative log-likelihood of the targets' ordering under a Plackett-Luce model of the
    logits (ListMLE): what the paper's lemma says RPL maximises.

    Item ``j`` is chosen from the items not ranked above it, ``R_j = {k : y_k <= y_j}``:
    ``-sum_j (f_j - logsumexp_{k in R_j} f_k)``. Tied items share their risk set (Breslow's
    approximation of the marginal over their orders, which keeps the loss independent of the
    candidates' order), and the bottom tie group adds nothing: every order of the last items is
    consistent with the targets, so their marginal probability is 1. A list with a single target
    level carries no signal."""
    import torch

    risk = (targets[:, None, :] <= targets[:, :, None]) & mask[:, None, :] & mask[:, :, None]
    scores = logits[:, None, :].expand_as(risk).masked_fill(~risk, float("-inf"))
    log_z = torch.logsumexp(scores, dim=-1).masked_fill(~mask, 0.0)
    ranked = _lower(targets, mask).any(dim=-1)  # some item below: not in the bottom group
    per_item = (log_z - logits) * ranked
    return per_item.sum(dim=-1), ranked.any(dim=-1)


LOSSES: dict[str, RankingLoss] = {
    "bce": RankingLoss("bce", bce_per_query, "every row is padding"),
    "ce": RankingLoss(
        "ce", ce_per_query, "every query's targets sum to zero (no positive item in any list)"
    ),
    "listnet": RankingLoss("listnet", listnet_per_query, "every row is padding"),
    "rpl": RankingLoss(
        "rpl",
        rpl_per_query,
        "RPL needs graded or teacher scores: with binary labels every item below another has "
        "target 0, so all RPL targets sum to zero (train on teacher probabilities or use bce/ce)",
    ),
    "rpl-self": RankingLoss(
        "rpl-self", rpl_self_per_query, "every query's targets sum to zero (no positive item)"
    ),
    "pl": RankingLoss(
        "pl",
        plackett_luce_per_query,
        "every list has a single target level (all items tied): no ordering to learn",
    ),
}


#: how teacher logits become training targets (``teacher_scores`` option): ``sigmoid`` gives the
#: paper's 0-1 scores; ``logits`` keeps the logits, so ListNet matches softmax(teacher logits), the
#: usual distillation target. Softmax over 0-1 values is nearly flat (e^1 between the surest
#: positive and the surest negative), so sigmoid targets give ListNet a weak signal.
TEACHER_SCORES: tuple[str, ...] = ("sigmoid", "logits")
#: losses that take only the targets' order or any real values, so raw teacher logits are valid
ANY_REAL_TARGETS: frozenset[str] = frozenset({"listnet", "pl"})


def get_loss(name: str) -> RankingLoss:
    """The loss registered as ``name`` (case-insensitive)."""
    key = name.strip().lower()
    if key not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; known: {', '.join(sorted(LOSSES))}")
    return LOSSES[key]
