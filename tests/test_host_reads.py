"""The model step of every neural ranker's scoring reads nothing back from the device.

A read from the device (a tensor's value as a Python number or bool, or an op whose output size
depends on values: ``nonzero``, ``bincount``, boolean indexing) makes the host wait for the GPU
to drain its queue, and forbids capturing the step in a CUDA graph. tests/test_gpu_path.py counts
the project's own reads of scores (``ReadCounter``: one download per call); the watch here sees
every frame, transformers' included, through a ``TorchDispatchMode``, from the uploaded inputs
to the scores: what it found before the scorers chose the attention mask on the host was
``aten.is_nonzero`` in transformers' ``masking_utils`` (``padding_mask.all()``, once per encoder
call: monoBERT, CROSS-JEM union/concat/hybrid, RankT5, the sentence-transformers
cross-encoder, and DPR/ANCE inside sentence-transformers' ``encode``), ``aten.bincount`` in
CROSS-JEM's merged layouts (``merge_rows``), ``aten.item`` in the Set-Encoder (its longest list,
every layer), and in ColBERT ``aten.is_nonzero`` per encoder call and ``aten.index_put_`` with a
boolean index (colbert-ai's ``colbert_score_reduce``, once per document batch), besides its
``ColBERT.mask``, which copies the ids to the host (``input_ids.cpu().tolist()``: on the CPU no
op is dispatched, on a GPU a device-to-host copy).

The dual encoders and ColBERT score through their libraries taken apart
(:mod:`rankers.families.dense_steps`, :mod:`rankers.families.colbert_steps`); each library's own
path stays as the oracle (``score_library``), and the taken-apart one gives its scores bit for
bit (:func:`test_the_model_step_gives_the_librarys_scores_bit_for_bit`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from toydata import WORDS

from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from rankers import create_ranker
from rankers.base import Ranker

#: ops that read a device value to the host, or whose output size depends on values (the
#: kernel reads it): each one waits for the device
READS = frozenset(
    {
        "_local_scalar_dense",
        "is_nonzero",
        "item",
        "equal",
        "allclose",
        "nonzero",
        "masked_select",
        "bincount",
        "_unique2",
        "unique_dim",
        "unique_consecutive",
        "repeat_interleave",
    }
)


class HostReads(TorchDispatchMode):
    """Records every op dispatched inside that reads the device (:data:`READS`, and indexing
    with a boolean tensor), whoever calls it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        name = func._overloadpacket.__name__
        index = args[1] if name in ("index", "index_put", "index_put_") and len(args) > 1 else ()
        bool_index = any(isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in index or ())
        if name in READS or bool_index:
            self.reads.append(str(func))
        return func(*args, **(kwargs or {}))


def _list(n: int, seed: int) -> CandidateList:
    """A list of ``n`` items of 1 to 6 toy words (rows of several lengths: padded batches and,
    with batches of one, unpadded ones)."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 7)))) for _ in range(n)]
    cands = tuple(Candidate(f"d{i}", t) for i, t in enumerate(texts))
    return CandidateList(Query(f"q{seed}", "apple banana cherry"), cands)


LISTS = [_list(12, 0), _list(9, 1), _list(5, 2)]

#: every neural ranker whose model step the project drives: (name, options)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "monobert": ("monobert", {"batch_size": 4}),
    "monobert-one-pair-batches": ("monobert", {"batch_size": 1}),
    "monobert-mean": ("monobert", {"batch_size": 4, "pooling": "mean"}),
    "monobert-pooler": ("monobert", {"batch_size": 4, "pooling": "pooler"}),
    "crossjem-union": ("crossjem", {"union_len": 32, "max_item_len": 8, "batch_queries": 2}),
    "crossjem-concat": ("crossjem", {"order": "concat", "union_len": 32, "max_item_len": 8}),
    "crossjem-hybrid": ("crossjem", {"order": "hybrid", "union_len": 32, "max_item_len": 8}),
    "crossjem-item-positions": (
        "crossjem",
        {"order": "concat", "item_positions": True, "union_len": 32, "max_item_len": 8},
    ),
    "crossjem-merged": ("crossjem", {"merge_layers": 1, "union_len": 32, "max_item_len": 8}),
    "set-encoder": ("set-encoder", {"batch_size": 4}),
    "rankt5": ("rankt5", {"batch_size": 4}),
    "st-crossencoder": ("st-crossencoder", {"batch_size": 4}),
    "dpr": ("dpr", {"batch_size": 4}),
    "dpr-precomputed": ("dpr", {"batch_size": 4, "precompute": True}),
    "ance-dot": ("ance", {"batch_size": 3, "similarity": "dot"}),
    "colbert": ("colbert", {"batch_size": 4}),
    "colbert-attend-to-mask-tokens": ("colbert", {"batch_size": 4, "attend_to_mask_tokens": True}),
}

#: the rankers that score through a library taken apart, whose own path is the oracle
#: (``score_library``); their cases, and more precisions, for the oracle test
LIBRARY_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    **{case: CASES[case] for case in CASES if CASES[case][0] in ("dpr", "ance", "colbert")},
    "dpr-bfloat16": ("dpr", {"batch_size": 4, "dtype": "bfloat16"}),
    "ance-one-text-batches": ("ance", {"batch_size": 1}),
    "colbert-bfloat16": ("colbert", {"batch_size": 4, "dtype": "bfloat16"}),
    "colbert-one-document-batches": ("colbert", {"batch_size": 1}),
    "colbert-punctuation-kept": ("colbert", {"batch_size": 4, "mask_punctuation": False}),
}

#: the dual encoders' scores are float64 (their similarities cast before the copy back)
FLOAT64 = ("dpr", "ance")


def _ranker(case: str, model: Path) -> Ranker:
    """The ranker of ``case`` on ``model``; with ``precompute``, :data:`LISTS` indexed."""
    from rankers.families.rankt5 import ENCDEC_PREFIX

    name, options = {**LIBRARY_CASES, **CASES}[case]
    prefix = ENCDEC_PREFIX if name == "rankt5" else ""
    ranker = create_ranker(name, {"model": prefix + str(model), **options})
    if options.get("precompute"):
        ranker.index(RankingSplit(dataset="toy", split="test", lists=LISTS, qrels={}))
    return ranker


def _model_step(ranker: Any) -> Callable[[], list[np.ndarray]]:
    """The model step of ``ranker``'s scoring on :data:`LISTS` (its inputs uploaded before);
    a ranker without the two steps (RankT5 uploads each batch of pairs as it goes): its
    ``score()``, whose uploads dispatch no device read either."""
    if not hasattr(ranker, "prepare_scoring"):
        return lambda: ranker.score(LISTS)
    prepared = ranker.prepare_scoring(LISTS)
    return lambda: ranker.score_prepared(prepared)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_model_step_reads_nothing_back_from_the_device(case: str, tiny_bert: Path) -> None:
    """From the uploaded inputs to the scores' download (on the CPU the download dispatches no
    op), no op anywhere reads the device: not the project's code, not transformers'."""
    ranker = _ranker(case, tiny_bert)
    ranker.score(LISTS[:1])  # loads the model outside the watch
    step = _model_step(ranker)
    watch = HostReads()
    with watch:
        scores = step()
    assert [len(s) for s in scores] == [12, 9, 5]
    assert watch.reads == []


#: a list with punctuation (ColBERT masks its vectors) and a list without candidates
PUNCTUATED = [
    CandidateList(
        Query("qp", "apple, banana?"),
        (Candidate("p0", "cherry; grape!"), Candidate("p1", "lemon (mango), olive.")),
    ),
    CandidateList(Query("qe", "plum"), ()),
]


@pytest.mark.parametrize("case", sorted(LIBRARY_CASES))
def test_the_model_step_gives_the_librarys_scores_bit_for_bit(case: str, tiny_bert: Path) -> None:
    """DPR/ANCE (sentence-transformers' ``encode``) and ColBERT (colbert-ai's ``query``,
    ``doc`` and ``score``) taken apart score as their library does, bit for bit: the same
    batches, modules and operations, with masks chosen on the host."""
    ranker: Any = _ranker(case, tiny_bert)
    lists = [*LISTS, *PUNCTUATED] if LIBRARY_CASES[case][0] == "colbert" else LISTS
    prepared = ranker.prepare_scoring(lists)
    assert getattr(prepared, "queries", True) is not None  # not the dual encoders' fallback
    scores = ranker.score_prepared(prepared)
    oracle = ranker.score_library(lists)
    assert [len(s) for s in scores] == [len(cl) for cl in lists]
    for a, b in zip(scores, oracle, strict=True):
        assert a.dtype == b.dtype
        assert np.array_equal(a, b)


def test_a_dual_encoder_that_encode_does_more_for_scores_through_encode(tiny_bert: Path) -> None:
    """A model whose ``encode`` truncates the embeddings (or adds a prompt...) is not taken
    apart: the host step prepares nothing and the scores are ``encode``'s."""
    ranker: Any = _ranker("dpr", tiny_bert)
    ranker.model.truncate_dim = 16
    prepared = ranker.prepare_scoring(LISTS)
    assert prepared.queries is None
    scores = ranker.score_prepared(prepared)
    for a, b in zip(scores, ranker.score_library(LISTS), strict=True):
        assert np.array_equal(a, b)
    full = _ranker("dpr", tiny_bert).score(LISTS)
    assert not np.array_equal(scores[0], full[0])  # the truncation changed the scores


def test_the_watch_sees_reads_in_any_frame() -> None:
    """The watch itself: a Python bool of a tensor, ``.item()``, a boolean index and
    ``bincount`` are seen (the first is what transformers' mask builder does with a 2D mask;
    under inference mode it dispatches as ``is_nonzero``), plain ops are not."""
    x = torch.arange(4)
    watch = HostReads()
    with watch:
        _ = x + 1
        _ = bool((x > -1).all())
        _ = x.max().item()
        _ = x[x > 1]
        _ = torch.bincount(x)
    assert watch.reads == [
        "aten._local_scalar_dense.default",
        "aten._local_scalar_dense.default",
        "aten.index.Tensor",
        "aten.bincount.default",
    ]


@pytest.mark.parametrize("case", sorted(CASES))
def test_masks_chosen_on_the_host_give_the_same_scores(
    case: str, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scores with the mask chosen on the host (none for an unpadded batch, a 4D boolean one for
    a padded batch) equal, bit for bit, those of the 2D mask transformers inspects itself."""
    ranker = _ranker(case, tiny_bert)
    chosen = ranker.score(LISTS)
    from rankers.inputs import masks

    monkeypatch.setattr(masks, "takes_row_mask", lambda encoder: False)
    inspected = ranker.score(LISTS)
    dtype = np.float64 if CASES[case][0] in FLOAT64 else np.float32
    for a, b in zip(chosen, inspected, strict=True):
        assert a.dtype == b.dtype == dtype
        assert np.array_equal(a, b)


@pytest.mark.parametrize("padded", [True, False])
def test_a_row_mask_gives_the_encoders_hidden_states_exactly(tiny_bert: Path, padded: bool) -> None:
    """The hidden states of an encoder call with :func:`~rankers.inputs.masks.encoder_mask`'s
    choice are those of the 2D mask, bit for bit, with and without padding."""
    from transformers import AutoModel

    from rankers.inputs.masks import encoder_mask, takes_row_mask

    encoder = AutoModel.from_pretrained(str(tiny_bert)).eval()
    assert takes_row_mask(encoder)
    ids = torch.randint(1000, 2000, (5, 11), generator=torch.Generator().manual_seed(0))
    lengths = torch.tensor([11, 7, 3, 11, 1]) if padded else torch.full((5,), 11)
    valid = torch.arange(11)[None, :] < lengths[:, None]
    with torch.inference_mode():
        before = encoder(input_ids=ids, attention_mask=valid.long()).last_hidden_state
        mask = encoder_mask(encoder, valid, full=not padded)
        assert (mask is None) is (not padded)
        after = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.equal(before, after)


def test_a_row_mask_gives_a_t5s_logits_exactly() -> None:
    """RankT5 on a T5 (its encoder and the decoder's cross-attention read the one mask): the
    host's choice gives the 2D mask's logits bit for bit (a small random T5, no download)."""
    from transformers import T5Config, T5ForConditionalGeneration

    from rankers.inputs.masks import encoder_mask, takes_row_mask

    torch.manual_seed(0)
    config = T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)
    model = T5ForConditionalGeneration(config).eval()
    assert takes_row_mask(model)
    ids = torch.randint(1, 100, (4, 9), generator=torch.Generator().manual_seed(0))
    start = torch.zeros(4, 1, dtype=torch.long)
    for lengths in ([9, 5, 2, 9], [9] * 4):
        valid = torch.arange(9)[None, :] < torch.tensor(lengths)[:, None]
        full = min(lengths) == 9
        with torch.inference_mode():
            before, after = (
                model(
                    input_ids=ids, attention_mask=mask, decoder_input_ids=start, use_cache=False
                ).logits
                for mask in (valid.long(), encoder_mask(model, valid, full))
            )
        assert torch.equal(before, after)


def test_an_encoder_without_sdpa_gets_the_2d_mask() -> None:
    """The classic attention adds its mask to the scores (a boolean one would add 1 where it
    should keep), a runtime's exported graph takes the 2D mask: both get it, as before."""
    from rankers.compute.runtimes import RuntimeEncoder
    from rankers.inputs.masks import encoder_mask, takes_row_mask

    class Config:
        _attn_implementation = "eager"

    class Eager:
        _supports_sdpa = True
        config = Config()

    valid = torch.tensor([[True, False]])
    for encoder in (Eager(), RuntimeEncoder):
        assert not takes_row_mask(encoder)
        out = encoder_mask(encoder, valid, full=False)
        assert out is not None and out.dtype == torch.long and out.tolist() == [[1, 0]]
    assert encoder_mask(Eager(), valid, full=None) is not None


@pytest.mark.parametrize("case", ["monobert", "crossjem-union", "set-encoder"])
def test_scoring_a_module_in_eval_mode_switches_no_submodule(
    case: str, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loaded ranker is in eval mode: scoring calls ``train()``/``eval()`` on nothing (each
    walks every submodule); a module in training mode (dev scoring) is switched and restored."""
    ranker: Any = _ranker(case, tiny_bert)
    ranker.score(LISTS[:1])
    switched: list[bool] = []
    train = torch.nn.Module.train

    def counted(module: torch.nn.Module, mode: bool = True) -> torch.nn.Module:
        switched.append(mode)
        return train(module, mode)

    monkeypatch.setattr(torch.nn.Module, "train", counted)
    expected = ranker.score(LISTS)
    assert switched == []
    ranker.module.train()
    switched.clear()
    scores = ranker.score(LISTS)
    assert switched[0] is False and switched[-1] is True  # eval for the call, then restored
    assert ranker.module.training and all(m.training for m in ranker.module.modules())
    for a, b in zip(scores, expected, strict=True):
        assert np.array_equal(a, b)


def test_the_float32_verdict_is_asked_once_per_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """``CastCache.get`` on a float32 module walks its parameters on the first call only; a
    new module is asked again, and a bfloat16 one still gets its cast copy."""
    from rankers.compute.precision import CastCache

    walks: list[int] = []
    parameters = torch.nn.Module.parameters

    def counted(module: torch.nn.Module, recurse: bool = True) -> Any:
        walks.append(id(module))
        return parameters(module, recurse)

    cache: CastCache[torch.nn.Module] = CastCache()
    first, second = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    monkeypatch.setattr(torch.nn.Module, "parameters", counted)
    assert cache.get(first, torch.float32) is first
    assert cache.get(first, torch.float32) is first
    assert walks == [id(first)]
    assert cache.get(second, torch.float32) is second
    assert walks == [id(first), id(second)]
    half = torch.nn.Linear(2, 1).to(torch.bfloat16)
    copy = cache.get(half, torch.float32)
    assert copy is not half and next(copy.parameters()).dtype == torch.float32
