"""Ranking losses: hand-computed values, padding invariance, batching, RPL's preconditions."""

from __future__ import annotations

import math

import pytest
import torch

from rankers.compute.losses import LOSSES, get_loss

# One query, N = 3: logits f = [1, 0, -1], targets y = [0.9, 0.5, 0.1].
F = [1.0, 0.0, -1.0]
Y = [0.9, 0.5, 0.1]
# log of sum_j exp(f_j) = log(e + 1 + 1/e)
LOG_Z_F = math.log(math.e + 1.0 + math.exp(-1.0))


def _loss(name: str, f: list[float], y: list[float]) -> float:
    return float(get_loss(name)(torch.tensor([f]), torch.tensor([y])))


def test_bce_hand_computed() -> None:
    # per item: -(y log sigmoid(f) + (1 - y) log(1 - sigmoid(f))), then the mean of the 3 items
    sig = [1.0 / (1.0 + math.exp(-x)) for x in F]
    items = [-(y * math.log(s) + (1 - y) * math.log(1 - s)) for s, y in zip(sig, Y, strict=True)]
    assert _loss("bce", F, Y) == pytest.approx(sum(items) / 3, abs=1e-6)


def test_ce_hand_computed() -> None:
    # targets normalised: y / 1.5 = [0.6, 1/3, 1/15]
    # loss = -sum_j t_j (f_j - log Z) = log Z - (0.6 * 1 + 0 - 1/15) = log Z - 8/15
    assert _loss("ce", F, Y) == pytest.approx(LOG_Z_F - 8.0 / 15.0, abs=1e-6)


def test_listnet_hand_computed() -> None:
    # P_y = softmax(y); loss = -sum_j P_y,j (f_j - log Z) = log Z - sum_j P_y,j f_j
    ey = [math.exp(v) for v in Y]
    py = [v / sum(ey) for v in ey]
    expected = LOG_Z_F - (py[0] * 1.0 + py[2] * -1.0)
    assert _loss("listnet", F, Y) == pytest.approx(expected, abs=1e-6)


def test_rpl_hand_computed() -> None:
    # L_1 = {2, 3}: s_1 = 0 + (-1) = -1, t_1 = 0.5 + 0.1 = 0.6
    # L_2 = {3}:    s_2 = -1,           t_2 = 0.1
    # L_3 = {}:     s_3 = 0,            t_3 = 0
    # t normalised = [6/7, 1/7, 0]; Z_s = e^-1 + e^-1 + e^0
    # loss = -(6/7 (-1 - log Z_s) + 1/7 (-1 - log Z_s)) = 1 + log(2/e + 1)
    expected = 1.0 + math.log(2.0 * math.exp(-1.0) + 1.0)
    assert _loss("rpl", F, Y) == pytest.approx(expected, abs=1e-6)


def test_rpl_ties_are_not_lower() -> None:
    # y = [0.5, 0.5, 0.2, 0.1], f = [0.3, -0.2, 0.4, -0.5]; ties are not in each other's L_j
    # L_1 = L_2 = {3, 4}: s = 0.4 - 0.5 = -0.1, t = 0.3;  L_3 = {4}: s = -0.5, t = 0.1;  L_4 = {}
    # t normalised = [3/7, 3/7, 1/7, 0]; Z = 2 e^-0.1 + e^-0.5 + 1
    # loss = -(6/7 (-0.1 - log Z) + 1/7 (-0.5 - log Z)) = log Z + 0.6/7 + 0.5/7
    log_z = math.log(2 * math.exp(-0.1) + math.exp(-0.5) + 1.0)
    got = _loss("rpl", [0.3, -0.2, 0.4, -0.5], [0.5, 0.5, 0.2, 0.1])
    assert got == pytest.approx(log_z + 1.1 / 7.0, abs=1e-6)


def test_plackett_luce_hand_computed() -> None:
    # ordering 1 > 2 > 3: -log P = (log Z_{1,2,3} - f_1) + (log Z_{2,3} - f_2) + 0
    expected = (LOG_Z_F - 1.0) + (math.log(1.0 + math.exp(-1.0)) - 0.0)
    assert _loss("pl", F, Y) == pytest.approx(expected, abs=1e-6)


def test_plackett_luce_ties_share_a_risk_set_and_the_bottom_group_adds_nothing() -> None:
    # y = [0.5, 0.5, 0.2, 0.1], f = [0.3, -0.2, 0.4, -0.5]: items 1 and 2 both choose from all
    # four, item 3 from {3, 4}, item 4 (bottom) adds nothing
    f, y = [0.3, -0.2, 0.4, -0.5], [0.5, 0.5, 0.2, 0.1]
    log_all = math.log(sum(math.exp(v) for v in f))
    expected = (log_all - 0.3) + (log_all + 0.2) + (math.log(math.exp(0.4) + math.exp(-0.5)) - 0.4)
    assert _loss("pl", f, y) == pytest.approx(expected, abs=1e-6)
    # binary labels: positives choose from everything, the negatives are the bottom group
    got = _loss("pl", [2.0, 0.0, 1.0], [0.0, 1.0, 0.0])
    assert got == pytest.approx(math.log(math.exp(2.0) + 1.0 + math.exp(1.0)) - 0.0, abs=1e-6)
    with pytest.raises(ValueError, match="single target level"):
        _loss("pl", [1.0, 2.0], [1.0, 1.0])


def test_plackett_luce_is_minimised_by_the_target_order() -> None:
    y = torch.tensor([[0.9, 0.5, 0.1]])
    right = get_loss("pl")(torch.tensor([[3.0, 0.0, -3.0]]), y)
    wrong = get_loss("pl")(torch.tensor([[-3.0, 0.0, 3.0]]), y)
    assert float(right) < 0.2 < float(wrong)


def test_rpl_self_hand_computed_and_trains_the_top_item() -> None:
    # L_j = lower items + j itself: s = [1 + 0 - 1, 0 - 1, -1] = [0, -1, -1],
    # t = [1.5, 0.6, 0.1] / 2.2; loss = log(1 + 2/e) - sum_j t_j s_j = log(1 + 2/e) + 7/22
    expected = math.log(1.0 + 2.0 * math.exp(-1.0)) + 7.0 / 22.0
    assert _loss("rpl-self", F, Y) == pytest.approx(expected, abs=1e-6)
    f = torch.tensor([[1.0, 0.0, -1.0]], requires_grad=True)
    get_loss("rpl-self")(f, torch.tensor([Y])).backward()
    assert f.grad is not None and f.grad[0, 0].item() != 0.0
    # unlike RPL as written, binary labels carry signal
    assert _loss("rpl-self", [1.0, 0.0], [1.0, 0.0]) > 0


def test_rpl_literal_form_gives_top_item_no_gradient() -> None:
    # The top item (highest target) is in no L_j, so the paper's equation never trains its logit,
    # and the gradient raises lower items' logits. Pinned so a change of definition is deliberate.
    f = torch.tensor([[1.0, 0.0, -1.0]], requires_grad=True)
    get_loss("rpl")(f, torch.tensor([Y])).backward()
    assert f.grad is not None
    assert f.grad[0, 0].item() == 0.0
    assert (f.grad[0, 1:] < 0).all()


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_padding_is_invisible(name: str) -> None:
    """Padded entries with nan/inf logits and targets change neither the loss nor the gradient."""
    logits = torch.tensor([[1.0, 0.0, -1.0], [0.5, -0.25, 2.0]])
    targets = torch.tensor([[0.9, 0.5, 0.1], [0.2, 0.7, 0.4]])
    f1 = logits.clone().requires_grad_(True)
    plain = get_loss(name)(f1, targets)
    plain.backward()

    garbage_f = torch.tensor([[float("nan"), 7.0], [float("inf"), -3.0]])
    garbage_y = torch.tensor([[float("nan"), 5.0], [-2.0, float("inf")]])
    f2 = torch.cat([logits, garbage_f], dim=1).requires_grad_(True)
    padded_y = torch.cat([targets, garbage_y], dim=1)
    mask = torch.tensor([[True] * 3 + [False] * 2] * 2)
    padded = get_loss(name)(f2, padded_y, mask)
    padded.backward()

    assert padded.item() == pytest.approx(plain.item(), abs=1e-6)
    assert f1.grad is not None and f2.grad is not None
    assert torch.allclose(f2.grad[:, :3], f1.grad, atol=1e-6)
    assert torch.equal(f2.grad[:, 3:], torch.zeros(2, 2))


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_batch_is_mean_over_queries_of_different_lengths(name: str) -> None:
    a = _loss(name, F, Y)
    b = _loss(name, [0.2, -0.4], [0.3, 0.8])
    logits = torch.tensor([F, [0.2, -0.4, 0.0]])
    targets = torch.tensor([Y, [0.3, 0.8, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    value = get_loss(name).compute(logits, targets, mask)
    assert value.loss.item() == pytest.approx((a + b) / 2, abs=1e-6)
    assert (value.used, value.skipped) == (2, 0)


def test_all_padding_row_is_skipped_with_finite_gradient() -> None:
    logits = torch.tensor([F, [9.0, 9.0, 9.0]], requires_grad=True)
    targets = torch.tensor([Y, [0.0, 0.0, 0.0]])
    mask = torch.tensor([[True] * 3, [False] * 3])
    value = get_loss("listnet").compute(logits, targets, mask)
    value.loss.backward()
    assert value.loss.item() == pytest.approx(_loss("listnet", F, Y), abs=1e-6)
    assert (value.used, value.skipped) == (1, 1)
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


def test_rpl_rejects_binary_labels() -> None:
    logits = torch.tensor([[0.3, 0.1, -0.2], [0.0, 1.0, 2.0]])
    binary = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    with pytest.raises(ValueError, match="RPL needs graded or teacher scores"):
        get_loss("rpl")(logits, binary)


def test_rpl_skips_binary_queries_in_a_graded_batch() -> None:
    logits = torch.tensor([F, [0.3, 0.1, -0.2]])
    targets = torch.tensor([Y, [1.0, 0.0, 0.0]])
    value = get_loss("rpl").compute(logits, targets)
    assert value.loss.item() == pytest.approx(_loss("rpl", F, Y), abs=1e-6)
    assert (value.used, value.skipped) == (1, 1)


@pytest.mark.parametrize("name", ["rpl", "ce"])
def test_negative_targets_are_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="sigmoid of teacher logits"):
        get_loss(name)(torch.tensor([F]), torch.tensor([[2.1, -0.3, -1.5]]))


def test_bce_rejects_targets_outside_unit_interval() -> None:
    with pytest.raises(ValueError, match=r"targets must be \[0.0, 1.0\]"):
        get_loss("bce")(torch.tensor([F]), torch.tensor([[2.0, 0.0, 1.0]]))


def test_ce_without_positive_is_an_error() -> None:
    with pytest.raises(ValueError, match="sum to zero"):
        get_loss("ce")(torch.tensor([F]), torch.tensor([[0.0, 0.0, 0.0]]))


def test_unknown_loss_lists_names() -> None:
    with pytest.raises(ValueError, match="known: bce, ce, listnet, pl, rpl, rpl-self"):
        get_loss("hinge")
    assert get_loss(" RPL ").name == "rpl"
