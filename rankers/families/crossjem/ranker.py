"""CROSS-JEM as a :class:`~rankers.base.Ranker`: joint scoring of a query's whole list."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
import torch
from torch import Tensor, nn

from bench.data.model import CandidateList, RankingSplit
from rankers.base import (
    RUNTIME,
    SCORE,
    TRAINING,
    RankerError,
    inherit_option,
    option,
)
from rankers.families.crossjem.held import HeldBatch, expand, hold_lists, takes_held_rows
from rankers.families.crossjem.inputs import (
    ORDERS,
    POSITIONS,
    SHARES,
    Layout,
    Row,
    build_rows,
    pack_groups,
)
from rankers.families.crossjem.model import CrossJEMBatch, CrossJEMModule, collate
from rankers.families.crossjem.packed import PackedRows, pack_lists
from rankers.families.crossjem.rowlength import (
    AUTO,
    CallCost,
    Choice,
    FlopCost,
    candidate_lengths,
    choose,
    longest_union_len,
    packed_calls,
)
from rankers.families.encoder import EncoderConfig, EncoderRanker
from rankers.hooks import EncoderCall, LatencyVariant, RowLengths
from rankers.inputs.batching import check_positions, special_ids, token_ids
from rankers.inputs.tokens import tokenise_items
from rankers.itemorder import item_texts

if TYPE_CHECKING:
    from transformers import PreTrainedModel

log = logging.getLogger(__name__)

#: a query text and its item texts: what training and scoring both start from
QueryItems = tuple[str, Sequence[str]]
#: most padding a scoring forward pass may add, as a fraction of its real tokens (option
#: ``pad_tolerance``, default by device). On CPU the encoder's time is proportional to the tokens
#: it computes, padding included, so rows are sorted by length and cut into runs within 5%. On a
#: GPU these batches are far from saturating the device and each encoder call costs fixed launch
#: overhead, so the default accepts up to 100% padding: in practice one call per batch of queries.
PAD_TOLERANCE = {"cpu": 0.05, "cuda": 1.0}


@dataclasses.dataclass
class CrossJEMConfig(EncoderConfig):
    union_len: int | str = option(
        242,
        role=TRAINING | SCORE,
        min=1,
        words=(AUTO,),
        help="L_u: most item tokens per encoder row (after the query: the union, or shared plus "
        "own tokens); lists that need more are packed into several rows. auto: the length whose "
        "rows the FLOP model predicts cheapest for the lists timed, chosen per N by bench "
        "latency (rankers/families/crossjem/rowlength.py)",
    )
    order: str = option(
        "union",
        role=TRAINING | SCORE,
        choices=ORDERS,
        help="row layout: union (the paper: the items' distinct tokens sorted by id, word order "
        "lost), concat (the items as written, one after another, no token shared), hybrid "
        "(tokens held by share_min or more items, or share_frac of the list, written once, sorted; "
        "the rest in item order)",
    )
    share_min: int = option(
        2,
        role=TRAINING | SCORE,
        min=2,
        needs={"order": ("hybrid",)},
        help="order=hybrid: a token is shared when at least this many items of the list hold it",
    )
    share_frac: float = option(
        0.0,
        role=TRAINING | SCORE,
        min=0,
        max=1,
        needs={"order": ("hybrid",)},
        keyed_at_default=False,
        help="order=hybrid: share a token held by at least max(2, ceil(share_frac x n)) of a "
        "list's n items, instead of share_min (0: off). A fixed count fits one list length: a "
        "token held by a share p of the items is held by about p x n, so a fraction shares the "
        "tokens of the same list frequency at every n (wikiqa, 2x over monoBERT: threshold 2 "
        "at n=10, at most 4 at n=100; 0.03 gives both)",
    )
    share: str = option(
        "all",
        role=TRAINING | SCORE,
        choices=SHARES,
        needs={"order": ("hybrid",)},
        help="order=hybrid: which tokens may be shared: all, or function (English function "
        "words and punctuation only, so every content word keeps its item order)",
    )
    content_share_min: int = option(
        0,
        role=TRAINING | SCORE,
        min=0,
        needs={"share": ("function",)},
        help="share=function: content words are shared too when at least this many items of "
        "the list hold them (0: never)",
    )
    query_pool: bool = option(
        False,
        role=TRAINING | SCORE,
        help="an item's tokens that also occur in the query are not written in the row; the "
        "item pools the query's copy instead (fewer row tokens; their place in the item is lost)",
    )
    positions: str = option(
        "row",
        role=TRAINING | SCORE,
        choices=POSITIONS,
        # under union every token is shared; with merging the first layers number the concat
        # row along the row and the later layers read no position ids
        needs={"order": ("concat", "hybrid"), "merge_layers": (0,)},
        help="position ids of tokens kept in item order (concat, hybrid): row (left to right "
        "along the row, as BERT) or item (query length + the token's place in its item, so each "
        "item restarts where the first begins)",
    )
    merge_layers: int = option(
        0,
        role=TRAINING | SCORE,
        min=0,
        # concat shares no token, so nothing would merge
        needs={"order": ("union", "hybrid")},
        help="token merging: the first this many encoder layers run over the items as written "
        "(concat row, positions along it), then each shared token's copies are averaged into its "
        "one place of the order/share_min layout for the other layers (0: no merging)",
    )
    item_positions: bool = option(
        False,
        role=TRAINING | SCORE,
        help="add sinusoidal encodings of each token's position in its item (paper 5.3)",
    )
    batch_queries: int = option(
        8,
        role=RUNTIME,
        min=1,
        help="queries per scoring forward pass (each may take several rows)",
    )
    pad_tolerance: float | None = option(
        None,
        role=RUNTIME,
        min=0,
        help="most padding per scoring encoder call, as a fraction of real tokens "
        "(none: 0.05 on CPU, 1.0 on CUDA)",
    )
    #: listwise by default; the paper's rpl needs teacher scores (see rankers.compute.losses)
    loss: str = inherit_option(EncoderConfig, "loss", "listnet")

    @property
    def fixed_union_len(self) -> int:
        """``union_len`` as a number; a RankerError while it is ``auto``, which is chosen from
        the lists to score first (:meth:`CrossJEMRanker.choose_union_len`)."""
        if self.union_len == AUTO:
            raise RankerError(
                "option union_len=auto is chosen from the lists a command times: bench latency "
                "chooses it per N; bench run and train need a number (rankers/configs/"
                "crossjem.yaml sets one per dataset), e.g. --set union_len=242"
            )
        return int(self.union_len)

    @property
    def layout_tag(self) -> str:
        """How the layout reads in latency columns and labels ("" for the paper's union)."""
        merged = f", merged after {self.merge_layers} layer" + "s" * (self.merge_layers > 1)
        if self.order == "union" and not self.query_pool:
            return "union" + merged if self.merge_layers else ""
        share = (
            f"share_frac={self.share_frac:g}" if self.share_frac else f"share_min={self.share_min}"
        )
        tag = self.order + (f" {share}" if self.order == "hybrid" else "")
        if self.share == "function":
            tag += ", function words" + (
                f" + content held by {self.content_share_min}" if self.content_share_min else ""
            )
        tag += ", query terms from the query" if self.query_pool else ""
        tag += ", item positions" if self.positions == "item" else ""
        if self.merge_layers and self.order == "hybrid":
            tag += ", row positions" if self.positions == "row" else ""
        return tag + (merged if self.merge_layers else "")

    @property
    def layout(self) -> Layout:
        """The row layout these options describe
        (:class:`~rankers.families.crossjem.inputs.Layout`)."""
        return Layout(
            order=self.order,
            share_min=self.share_min,
            share_frac=self.share_frac,
            positions=self.positions,
            merge_layers=self.merge_layers,
            share=self.share,
            query_pool=self.query_pool,
            content_min=self.content_share_min,
        )

    def __post_init__(self) -> None:
        """Options that do nothing in the chosen layout are refused by their declared ``needs``
        (:meth:`RankerConfig.__post_init__`); here only the checks across values. The runtime
        conflict comes first: it holds whether or not that runtime's package is installed, which
        the base check looks at."""
        if self.merge_layers and self.runtime != "torch":
            raise RankerError(
                f"option merge_layers={self.merge_layers} runs the encoder's layers one by one "
                f"in torch; runtime={self.runtime} runs the whole encoder as one graph: use "
                "runtime=torch or merge_layers=0"
            )
        super().__post_init__()
        if self.share_frac and self.share_min != 2:
            raise RankerError(
                f"option share_frac={self.share_frac:g} replaces share_min={self.share_min} "
                "(the count a token's holders must reach): set one of them"
            )
        if self.content_share_min and self.content_share_min < self.share_min:
            raise RankerError(
                f"option content_share_min={self.content_share_min} needs a value >= share_min "
                f"({self.share_min})"
            )
        if self.query_pool and self.merge_layers:
            raise RankerError(
                "option query_pool cannot be combined with merge_layers > 0 (the first layers "
                "run over the items as written)"
            )
        if self.union_len != AUTO and self.max_item_len > self.fixed_union_len:
            raise RankerError(
                f"option max_item_len={self.max_item_len} exceeds union_len={self.union_len}: "
                "an item must fit in one encoder row"
            )


class CrossJEMRanker(EncoderRanker[CrossJEMConfig]):
    """Scores all items of a query in one encoder pass over [CLS] query [SEP] union [SEP] (or an
    order-keeping layout: option ``order``)."""

    name: ClassVar[str] = "crossjem"
    family: ClassVar[str] = "joint"
    Config = CrossJEMConfig
    pointwise: ClassVar[bool] = False

    def check_model(self) -> None:
        """:meth:`EncoderRanker.check_model`, and ``union_len=auto`` refused: what plans a run
        or a training calls, and their rows need one length (bench latency chooses it per N)."""
        _ = self.cfg.fixed_union_len
        super().check_model()

    def _check_config(self, config: Any) -> None:
        cfg = self.cfg
        # auto: the shortest row it may choose (one item) must fit
        union_len = cfg.max_item_len if cfg.union_len == AUTO else cfg.fixed_union_len
        if self._item_block():  # shared block after the items
            longest = cfg.max_query_len + cfg.max_item_len + union_len + 3
            formula = "crossjem: max_query_len + max_item_len + union_len + 3 (hybrid, item)"
        else:
            longest = cfg.max_query_len + union_len + 3
            formula = "crossjem: max_query_len + union_len + 3"
        check_positions(config, longest, formula)
        layers = int(getattr(config, "num_hidden_layers", 0))
        if self.cfg.merge_layers >= layers > 0:
            raise RankerError(
                f"option merge_layers={self.cfg.merge_layers} must be below the encoder's "
                f"{layers} layers (at least one layer must run over the merged row)"
            )

    def _item_block(self) -> bool:
        """Whether a row's position ids run past its union by the longest item (hybrid rows
        numbered by item positions put the shared block after the items)."""
        return self.cfg.positions == "item" and self.cfg.order == "hybrid"

    graphs_encoder: ClassVar[bool] = True

    def _check_cuda_graphs(self) -> None:
        """A merged layout runs its layers itself: CUDA graphs of the whole encoder skip it."""
        super()._check_cuda_graphs()
        if self.cfg.merge_layers:
            raise RankerError(
                "option cuda_graphs=true graphs whole encoder calls; merge_layers="
                f"{self.cfg.merge_layers} runs the layers itself: use merge_layers=0"
            )

    def _build_module(self, encoder: PreTrainedModel) -> nn.Module:
        return CrossJEMModule(
            encoder,
            dropout=self.cfg.dropout,
            item_positions=self.cfg.item_positions,
            max_item_len=self.cfg.max_item_len,
            merge_layers=self.cfg.merge_layers,
        )

    # -- inputs --------------------------------------------------------------------------------
    def rows(self, query: str, items: Sequence[str]) -> list[Row]:
        """The encoder rows of one query, built by the simple implementation
        (:func:`~rankers.families.crossjem.inputs.build_rows`): the oracle of :meth:`pack`."""
        cfg = self.cfg
        q = token_ids(self.tokenizer, [query], cfg.max_query_len)[0]
        ids = token_ids(self.tokenizer, items, cfg.max_item_len)
        cls, sep = self.special.cls, self.special.sep
        return build_rows(q, ids, cfg.fixed_union_len, cls, sep, self.layout)

    @property
    def layout(self) -> Layout:
        """The configured layout bound to this ranker's tokenizer (function-word ids)."""
        bound = getattr(self, "_layout", None)
        if bound is None:
            bound = self._layout = self.cfg.layout.bind(self.tokenizer)
        return bound

    def pack(self, lists: Sequence[QueryItems], tolerance: float | None = None) -> PackedRows:
        """Host-side inputs of several lists with array operations
        (:func:`~rankers.families.crossjem.packed.pack_lists`); item ids from the index-time
        store."""
        sp = self.special
        queries = self.query_tokens([q for q, _ in lists])
        items = [self.lookup_items(texts) for _, texts in lists]
        cfg = self.cfg
        return pack_lists(
            queries, items, cfg.fixed_union_len, sp.cls, sp.sep, sp.pad, tolerance, self.layout
        )

    def prepare(self, lists: Sequence[QueryItems]) -> CrossJEMBatch:
        """Packed batch for :meth:`forward` (training: one bucket), on this ranker's device."""
        return CrossJEMBatch.upload(self.pack(lists), self.device)

    def prepare_simple(self, lists: Sequence[QueryItems]) -> CrossJEMBatch:
        """:meth:`prepare` through the simple implementation (tests compare the two)."""
        packed = collate([self.rows(query, items) for query, items in lists])
        return CrossJEMBatch.upload(packed, self.device)

    def forward(
        self, batch: CrossJEMBatch, module: nn.Module | None = None
    ) -> tuple[Tensor, Tensor]:
        """Logits (B, N_max) and item mask; train/eval mode and autograd are the caller's.

        ``module``: a wrapper of :attr:`module` to call instead (the trainer's DDP model)."""
        return (module if module is not None else self.module)(batch)

    def latency_variants(self, batch_sizes: Sequence[int] | None = None) -> list[LatencyVariant]:
        """The encoder variants, in columns tagged with the row layout when it is not the
        paper's union (``crossjem {concat, item positions}``), so a latency table or plot never
        passes one layout's timings off as another's."""
        tag = self.cfg.layout_tag
        out = super().latency_variants(batch_sizes)
        if not tag:
            return out
        named = f"{self.name} {{{tag}}}"  # braces: square brackets are rich markup
        return [
            LatencyVariant(
                v.label.replace(self.name, named, 1), v.options, named + v.column[len(self.name) :]
            )
            for v in out
        ]

    def training_step_shape(self, list_lengths: Sequence[int]) -> tuple[int, int] | None:
        """Rows of full length: a list of N items needs at most ceil(N x max_item_len /
        union_len) rows (no token shared: the upper bound), for the whole lists one
        forward/backward pass holds (:meth:`step_pass`: a list's items share rows, so a list
        is never cut)."""
        cfg = self.cfg
        union_len = cfg.fixed_union_len
        rows = -(-self.step_items(list_lengths) * cfg.max_item_len // union_len)
        return self.step_pass(list_lengths)[0] * rows, cfg.max_query_len + union_len + 3

    def input_report(self, lists: Sequence[CandidateList]) -> dict[str, Any]:
        """Cuts (:meth:`EncoderRanker.input_report`) and encoder rows per list in this layout:
        items of a list split over several rows never attend to each other."""
        rows = [self.pack([(cl.query.text, cl.texts)]).rows for cl in lists if len(cl)]
        return {**super().input_report(lists), "rows": row_counts(rows, self.cfg)}

    @classmethod
    def rows_per_list(
        cls, split: RankingSplit, tokenize: Callable[[str], list[str]], options: Mapping[str, Any]
    ) -> str:
        """``L_u 272: union 1.04 (9) / concat 1.37 (73) / hybrid 1.04 (10)``: the mean encoder
        rows per list of ``split`` in each layout at the ``union_len`` of ``options`` (items cut
        at their ``max_item_len`` of ``tokenize``'s tokens), and how many lists span several rows
        (their items never see each other): what `bench datasets` shows of a dataset."""
        cfg = cls.Config.from_options(options)
        # the tokenizer's own ids where it has them (packing follows their order), else stand-ins
        owner = getattr(tokenize, "__self__", None)
        seen: dict[str, int] = {}
        to_ids: Callable[[list[str]], list[int]] = getattr(
            owner, "convert_tokens_to_ids", lambda ts: [seen.setdefault(t, len(seen)) for t in ts]
        )
        ids = {t: to_ids(tokenize(t)[: cfg.max_item_len]) for cl in split.lists for t in cl.texts}
        parts = []
        for order in ORDERS:
            rows = [
                len(pack_groups([ids[t] for t in cl.texts], cfg.fixed_union_len, Layout(order)))
                for cl in split.lists
            ]
            parts.append(f"{order} {np.mean(rows):.2f} ({sum(r > 1 for r in rows)})")
        return f"L_u {cfg.union_len}: " + " / ".join(parts)

    # -- scoring -------------------------------------------------------------------------------
    host_step: ClassVar[str | None] = (
        "query WordPiece; item ids from the index-time store (WordPiece in end-to-end mode); "
        "canonical order, shared tokens, next-fit packing, rows and pooling indices with NumPy; "
        "length buckets; one host-to-device copy per batch of queries"
    )

    def prepare_scoring(self, lists: Sequence[CandidateList]) -> list[CrossJEMBatch | HeldBatch]:
        """One batch per ``batch_queries`` lists: rows sorted by length into buckets. In the
        union layout with every item held by the store, only the host's half
        (:func:`~rankers.families.crossjem.held.hold_lists`); the device writes the rest in
        :meth:`score_prepared`."""
        step, tolerance = self.cfg.batch_queries, self.pad_tolerance
        return [
            self._prepare_batch(lists[i : i + step], tolerance) for i in range(0, len(lists), step)
        ]

    def _prepare_batch(
        self, lists: Sequence[CandidateList], tolerance: float
    ) -> CrossJEMBatch | HeldBatch:
        if takes_held_rows(self.layout):
            rows = [self.held_rows(cl.texts) for cl in lists]
            if all(r is not None for r in rows):
                sp = self.special
                queries = self.query_tokens([cl.query.text for cl in lists])
                held = cast("list[np.ndarray]", rows)
                union_len, special = self.cfg.fixed_union_len, (sp.cls, sp.sep, sp.pad)
                store = self.item_tokens
                return hold_lists(queries, store, held, union_len, special, tolerance, self.device)
        packed = self.pack([(cl.query.text, cl.texts) for cl in lists], tolerance)
        return CrossJEMBatch.upload(packed, self.device)

    @property
    def pad_tolerance(self) -> float:
        """Most padding per scoring encoder call: the option, else the device's default."""
        tolerance = self.cfg.pad_tolerance
        if tolerance is None:
            tolerance = PAD_TOLERANCE["cuda" if self.device.startswith("cuda") else "cpu"]
        return tolerance

    def score_prepared(self, prepared: list[CrossJEMBatch | HeldBatch]) -> list[np.ndarray]:
        """Every bucket through the (cast) module; one device-to-host copy per call. A host's
        half is expanded on the device first (:func:`~rankers.families.crossjem.held.expand`)."""
        module = self.scoring_module()
        assert isinstance(module, CrossJEMModule)
        with self.inference():
            pad = self.special.pad
            batches = [b if isinstance(b, CrossJEMBatch) else expand(b, pad) for b in prepared]
            placed = []
            for batch in batches:  # each batch's logits put in list order on the device
                logits = [
                    module.bucket_logits(batch, b, batch.bucket_full(b)) for b in batch.buckets
                ]
                assert batch.lengths is not None
                starts = torch.cumsum(batch.lengths, 0) - batch.lengths
                flat = torch.zeros(sum(batch.n_items), device=batch.input_ids.device)
                if logits:
                    flat[starts[batch.slot_list] + batch.slot_item] = torch.cat(logits)
                placed.append(flat)
            values = torch.cat(placed).cpu().numpy() if placed else np.zeros(0, np.float32)
        sizes = [n for batch in prepared for n in batch.n_items]
        out = np.split(values, np.cumsum(sizes)[:-1]) if sizes else []
        return out

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        return self.score_prepared(self.prepare_scoring(lists))

    def cost_model_settings(self) -> dict[str, Any]:
        """L_q, L_k, L_u, row layout and model: what the paper's cost model compares with
        monoBERT (which shares L_q and L_k)."""
        cfg = self.cfg
        return {
            "model": cfg.model,
            "max_query_len": cfg.max_query_len,
            "max_item_len": cfg.max_item_len,
            "union_len": cfg.union_len,
            "order": cfg.order,
            "share_min": cfg.share_min,
            "positions": cfg.positions,
            "merge_layers": cfg.merge_layers,
            # newer layout options only where set, so records of older layouts keep their settings
            **({"share": cfg.share} if cfg.share != "all" else {}),
            **({"query_pool": True} if cfg.query_pool else {}),
            **({"content_share_min": cfg.content_share_min} if cfg.content_share_min else {}),
            **({"share_frac": cfg.share_frac} if cfg.share_frac else {}),
        }

    #: bench latency times untrained heads: rows as long as the lists make cheapest
    latency_defaults: ClassVar[Mapping[str, Any]] = {"union_len": AUTO}

    def chosen_options(self, lists: Sequence[CandidateList]) -> dict[str, Any]:
        """``union_len`` chosen for ``lists`` when it is ``auto`` (:meth:`choose_union_len`
        with the encoder's tokenizer and config, read without loading weights)."""
        if self.cfg.union_len != AUTO:
            return {}
        from transformers import AutoConfig, AutoTokenizer

        from rankers.io.models import resolve_model

        path = resolve_model(self.cfg.model).path
        tokenizer = AutoTokenizer.from_pretrained(path)
        choice = self.choose_union_len(lists, tokenizer, AutoConfig.from_pretrained(path))
        log.info(
            "%s: union_len=auto chose %d for %d lists (%s)",
            self.name,
            choice.union_len,
            len(lists),
            ", ".join(f"{k}: {v:.3g}" for k, v in choice.costs.items()),
        )
        return {"union_len": choice.union_len}

    def choose_union_len(
        self,
        lists: Sequence[CandidateList],
        tokenizer: Any,
        encoder_config: Any,
        call_cost: CallCost | None = None,
    ) -> Choice:
        """The row length whose packed rows of ``lists`` cost least
        (:mod:`~rankers.families.crossjem.rowlength`): each candidate up to the longest the
        encoder's positions allow, packed as scoring packs (``batch_queries`` lists per pack,
        buckets within :attr:`pad_tolerance`); ``call_cost``: the cost of one encoder call
        (default: the FLOP model of ``encoder_config``)."""
        cfg = self.cfg
        extra = cfg.max_item_len if self._item_block() else 0
        positions = int(getattr(encoder_config, "max_position_embeddings", 512))
        longest = longest_union_len(positions, cfg.max_query_len, extra)
        candidates = candidate_lengths(cfg.max_item_len, longest)
        sp, layout = special_ids(tokenizer), cfg.layout.bind(tokenizer)
        texts = [cl.query.text for cl in lists]
        queries = [np.asarray(q, np.int64) for q in token_ids(tokenizer, texts, cfg.max_query_len)]
        items = [
            tokenise_items(tokenizer, item_texts(cfg, cl.texts), cfg.max_item_len) for cl in lists
        ]
        step, tolerance = cfg.batch_queries, self.pad_tolerance

        def pack(length: int) -> list[PackedRows]:
            return [
                pack_lists(
                    queries[i : i + step],
                    items[i : i + step],
                    length,
                    sp.cls,
                    sp.sep,
                    sp.pad,
                    tolerance,
                    layout,
                )
                for i in range(0, len(lists), step)
            ]

        cost = call_cost or FlopCost.of_config(encoder_config)
        layers = int(encoder_config.num_hidden_layers)
        return choose(candidates, pack, cost, layers, cfg.merge_layers)

    def row_lengths(
        self, tokenizer: Any, query: Sequence[int], items: Sequence[Sequence[int]]
    ) -> RowLengths:
        """The rows :meth:`rows` builds in the configured layout, bound to ``tokenizer``."""
        layout = self.cfg.layout.bind(tokenizer)
        rows = build_rows(query, items, self.cfg.fixed_union_len, 0, 0, layout)
        return RowLengths(
            rows=tuple(len(r.input_ids) for r in rows),
            first_rows=tuple(len(r.first_ids) for r in rows if r.first_ids),
            first_layers=layout.merge_layers,
        )

    def encoder_calls(self, prepared: list[CrossJEMBatch | HeldBatch]) -> list[EncoderCall]:
        """One call per bucket of :meth:`score_prepared`, masked unless every row fills the
        bucket's width; a merged layout's bucket is two calls: its first ``merge_layers``
        layers over the concat rows, the others over the merged rows, both with the additive
        mask :func:`~rankers.families.crossjem.model.run_layers` always passes."""
        layers = int(self.encoder_config().num_hidden_layers)
        merged = self.cfg.merge_layers
        return [
            call
            for batch in prepared
            for call in packed_calls(_row_lengths(batch), batch.buckets, layers, merged)
        ]


def _row_lengths(batch: CrossJEMBatch | HeldBatch) -> list[int]:
    """The rows' lengths of a prepared batch, from the host where it keeps them."""
    if batch.host_row_len is not None:
        return [int(x) for x in batch.host_row_len.tolist()]
    assert isinstance(batch, CrossJEMBatch)
    return [int(x) for x in batch.row_len.tolist()]


def row_counts(rows: Sequence[int], cfg: CrossJEMConfig) -> dict[str, Any]:
    """Rows per list (mean, max) and lists split over several rows, for one layout."""
    return {
        "layout": cfg.layout_tag or "union",
        "union_len": cfg.union_len,
        "lists": len(rows),
        "mean": float(np.mean(rows)) if rows else 0.0,
        "max": max(rows, default=0),
        "split": sum(1 for r in rows if r > 1),
    }
