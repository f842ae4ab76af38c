"""Shared plumbing for rankers built on a Hugging Face encoder (monoBERT, CROSS-JEM).

One place loads the encoder and tokenizer (from a model alias/path via
:func:`rankers.io.models.resolve_model`, or from a saved checkpoint), seeds the head, handles device
and autocast, saves/loads checkpoints and records provenance, so the two rankers differ only in
how they build inputs and heads. Both truncate queries and items at the WordPiece level with the
same limits, which keeps the monoBERT baseline and CROSS-JEM comparable.

Checkpoint layout (``save(path)``)::

    path/ranker.json          describe(): name, config, model id, weight hashes
    path/encoder/             encoder weights + tokenizer (save_pretrained)
    path/head.safetensors     every non-encoder parameter of the module
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np
import torch
from torch import Tensor, nn

from bench.core.device import resolve_device
from bench.core.trained import TrainingSummary
from bench.data.model import CandidateList, RankingSplit
from rankers.base import (
    GIVEN,
    RUNTIME,
    SCORE,
    TRAINING,
    Ranker,
    RankerError,
    TrainingConfig,
    inherit_option,
    option,
)
from rankers.compute.losses import ANY_REAL_TARGETS, TEACHER_SCORES
from rankers.compute.precision import (
    INT8,
    CastCache,
    check_dtype_device,
    scoring_dtype,
    scoring_precision,
)
from rankers.compute.runtimes import (
    DEFAULT_INT8_RECIPE,
    INT8_RECIPES,
    ONNX_GRAPHS,
    RUNTIMES,
    RuntimeCache,
    check_runtime,
    runtime_precision,
)
from rankers.hooks import (
    EncoderRun,
    Exportable,
    Fits,
    InputChecks,
    LatencyParts,
    LatencyVariant,
    Persistent,
)
from rankers.inputs.batching import SpecialIds, cut_counts, special_ids, token_ids
from rankers.inputs.tokens import ItemIds, ItemTokens
from rankers.io.models import resolve_model, state_hash, weights_hash
from rankers.itemorder import item_texts
from rankers.trainconfig import ListTrainingConfig

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from rankers.io.export import Exported

log = logging.getLogger(__name__)

ENCODER_DIR = "encoder"
HEAD_FILE = "head.safetensors"
#: an exported folder's description of the ranker (what ``ranker.json`` holds in a save())
EXPORTED_RANKER = "bench-ranker.json"


@dataclasses.dataclass
class EncoderConfig(ListTrainingConfig):
    """Settings every encoder ranker shares. ``checkpoint`` (a ``save()`` folder) wins over
    ``model``; on load its saved settings are adopted except the runtime ones (batch sizes,
    dtype, pre-tokenising: :attr:`Role.RUNTIME <rankers.base.Role.RUNTIME>`)."""

    model: str = option(
        "minilm-l6", role=TRAINING | SCORE, help="encoder: alias, Hugging Face id or folder"
    )
    checkpoint: str | None = option(
        None,
        role=TRAINING | RUNTIME,
        help="a save() folder: replaces model with its weights and settings; fit continues it",
    )
    max_query_len: int = option(
        32, role=TRAINING | SCORE, min=1, help="WordPiece tokens kept per query"
    )
    max_item_len: int = option(
        32, role=TRAINING | SCORE, min=1, help="WordPiece tokens kept per item"
    )
    dropout: float = option(
        0.1, role=TRAINING, min=0, below=1, help="dropout before the head (training only)"
    )
    seed: int = inherit_option(
        TrainingConfig, "seed", 0, help="head initialisation and training order"
    )
    dtype: str = inherit_option(
        ListTrainingConfig, "dtype", "auto", value_needs={INT8: {"runtime": ("onnxruntime",)}}
    )
    pretokenise: bool = option(
        True,
        role=RUNTIME,
        help="tokenise index()'s items once, so scoring only tokenises the query (same scores)",
    )
    cuda_graphs: bool = option(
        False,
        role=RUNTIME,
        keyed_at_default=False,
        help="score through CUDA graphs: each encoder call rounded up to a shape bucket (rows "
        "to a power of two, width to a multiple of 16, padding masked) and replayed from a "
        "graph captured on the bucket's first call (same scores; CUDA and runtime=torch only)",
    )
    runtime: str = option(
        "torch",
        role=RUNTIME,
        choices=RUNTIMES,
        help="what runs the encoder when scoring: torch (eager), onnxruntime (float32, int8) or "
        "openvino (float32, bfloat16), the encoder exported to ONNX once per loaded model; "
        "training always runs torch (needs the runtimes extra)",
    )
    onnx_graph: str = option(
        "fused",
        role=RUNTIME,
        choices=ONNX_GRAPHS,
        needs={"runtime": ("onnxruntime",)},
        help="the graph runtime=onnxruntime runs: fused (eager-attention export with ONNX "
        "Runtime's BERT fusions, int8 quantized after fusion) or plain (the sdpa export, its "
        "linear layers quantized for int8); each ranker's faster one differs (docs/usage.md)",
    )
    int8_recipe: str = option(
        DEFAULT_INT8_RECIPE,
        role=RUNTIME,
        choices=tuple(INT8_RECIPES),
        needs={"dtype": (INT8,)},
        help="which weight MatMuls dtype=int8 keeps in float32: ffn-float (both feed-forward "
        "MatMuls, whose outlier inputs per-call int8 scales coarsen most; attention's projections "
        "int8), ffn-out-float (the feed-forward output only), ffn-out-first-float (that and the "
        "first layer) or all (none: every MatMul int8, fastest, least accurate); "
        "docs/results.md#precision",
    )
    # -- training (rankers.fit.lists.fit_lists) --
    teacher_scores: str = option(
        "sigmoid",
        role=TRAINING,
        choices=TEACHER_SCORES,
        needs={"teacher": GIVEN},
        help="teacher logits -> targets: sigmoid (the paper's 0-1 scores) or the logits themselves "
        "(listnet then matches softmax(teacher logits); pl/listnet only)",
    )
    train_list_size: int = option(
        0,
        role=TRAINING,
        min=0,
        help="grow each train list to N items with BM25 negatives from the train collection "
        "(0: lists as given)",
    )
    train_max_items: int = option(
        64,
        role=TRAINING,
        min=0,
        help="most items of a train list in a step: its positives plus a seeded sample of its "
        "negatives; bounds a step's memory to train_batch_queries x this many items on long "
        "lists (0: whole lists)",
    )
    epochs: int = inherit_option(TrainingConfig, "epochs", 3, help="passes over the train lists")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_runtime(self.runtime, self.dtype)
        if self.teacher and self.teacher_scores == "logits" and self.loss not in ANY_REAL_TARGETS:
            raise RankerError(
                f"option teacher_scores=logits needs a loss that takes any real targets "
                f"({', '.join(sorted(ANY_REAL_TARGETS))}); loss {self.loss} needs 0-1 targets "
                "(teacher_scores=sigmoid)"
            )
        if self.train_max_items == 1:
            raise RankerError(
                "option train_max_items=1 leaves a list one item, from which a list loss learns "
                "nothing; use 2 or more (0: whole lists)"
            )
        if self.train_max_items and self.train_list_size > self.train_max_items:
            raise RankerError(
                f"option train_list_size={self.train_list_size} grows lists beyond "
                f"train_max_items={self.train_max_items}, which would cut them back; raise "
                "train_max_items or set it to 0"
            )


#: the config class of an encoder ranker
EC = TypeVar("EC", bound=EncoderConfig)


class EncoderRanker(
    Ranker[EC], LatencyParts, InputChecks, Fits, Persistent, Exportable, Generic[EC]
):
    """A ranker whose module is ``encoder`` (Hugging Face AutoModel) plus a small head.

    Subclasses build the module in :meth:`_build_module` and implement scoring; the encoder,
    tokenizer, device, autocast, checkpoints and provenance live here. Loading is lazy: the
    first use of :attr:`module` or :attr:`tokenizer` loads the weights.
    """

    #: (the ignore: see Ranker.Config)
    Config: type[EC] = EncoderConfig  # type: ignore[assignment]
    trainable: ClassVar[bool] = True
    #: the list trainer (:func:`rankers.fit.lists.fit_lists`) splits every batch over processes
    distributed_training: ClassVar[bool] = True

    def __init__(self, config: EC | None = None, device: str = "cpu") -> None:
        super().__init__(config, device)
        self.device = resolve_device(device)
        self._module: nn.Module | None = None
        self._tokenizer: Any = None
        self._special: SpecialIds | None = None
        self._base: dict[str, Any] = {}
        self._items: ItemTokens | None = None
        # _build_module's heads are named `classifier` (a module's FLOAT32_PARTS, if it has
        # them, name more): kept float32 in the bf16 scoring copy
        self._cast: CastCache[nn.Module] = CastCache(
            lambda m: [m.get_submodule(n) for n in getattr(m, "FLOAT32_PARTS", ("classifier",))]
        )
        self._runtime = RuntimeCache()
        check_dtype_device(self.cfg.dtype, self.device)
        #: the scoring module with its encoder through CUDA graphs (option cuda_graphs), and the
        #: graph maker (rankers.inputs.graphs.CudaGraphs; tests give a fake)
        self._graphed: tuple[nn.Module, nn.Module] | None = None
        self._graph_maker: Any = None
        if self.cfg.cuda_graphs:
            self._check_cuda_graphs()
        if self.cfg.runtime != "torch" and self.device != "cpu":
            raise RankerError(
                f"option runtime={self.cfg.runtime} runs on the CPU, not on device "
                f"{self.device!r}; use --device cpu or runtime=torch"
            )

    def untrained_weights(self) -> str | None:
        return None if self.cfg.checkpoint else f"the {self.name} head on a bare encoder"

    #: whether scoring calls ``module.encoder`` as a whole (what option ``cuda_graphs`` graphs)
    graphs_encoder: ClassVar[bool] = False

    def _check_cuda_graphs(self) -> None:
        """Option ``cuda_graphs`` needs a CUDA device, the torch runtime and a ranker whose
        scoring calls its encoder whole; anything else is refused, naming what to change."""
        why = ""
        if not self.device.startswith("cuda"):
            why = f"a CUDA device (--device cuda), not {self.device!r}"
        elif self.cfg.runtime != "torch":
            why = f"runtime=torch, not runtime={self.cfg.runtime}"
        elif not self.graphs_encoder:
            why = f"a ranker that calls its encoder whole ({self.name} runs its layers itself)"
        if why:
            raise RankerError(f"option cuda_graphs=true captures CUDA graphs: it needs {why}")

    # -- subclass hooks ------------------------------------------------------------------------
    @abstractmethod
    def _build_module(self, encoder: PreTrainedModel) -> nn.Module:
        """Wrap the encoder with this ranker's head; the result must keep it as ``.encoder``."""

    def _check_config(self, config: Any) -> None:  # noqa: B027 - optional hook
        """Validate the options against the encoder's config (``transformers.PretrainedConfig``:
        max positions, layers...): called by :meth:`check_model` before any work, and again
        on the loaded encoder."""

    def check_model(self) -> None:
        """Check the options against the model's config, read from its folder without loading
        any weights, so that a value the model cannot take stops the command (and ``--plan``)
        before any work, not after hours of teacher training. A hub id (not on disk) and a
        checkpoint (its options were checked when it was trained) are checked on loading."""
        if self.cfg.checkpoint:
            return
        ref = resolve_model(self.cfg.model)
        if not ref.local:
            return
        from transformers import AutoConfig

        try:
            config = AutoConfig.from_pretrained(ref.path)
        except (OSError, ValueError) as exc:  # not a model folder: loading says so
            log.debug("%s: no config to check in %s (%s)", self.name, ref.path, exc)
            return
        self._check_config(config)

    # -- loading -------------------------------------------------------------------------------
    @property
    def module(self) -> nn.Module:
        if self._module is None:
            if self.cfg.checkpoint:
                self.load(Path(self.cfg.checkpoint))
            else:
                ref = resolve_model(self.cfg.model)
                self._base = {
                    "model_id": ref.model_id,
                    "base_weights_hash": weights_hash(ref.path) if ref.local else None,
                }
                self._build(ref.path, head=None)
        assert self._module is not None
        return self._module

    def encoder_config(self) -> Any:
        """The Hugging Face config of the transformer encoder (layers, sizes, heads)."""
        encoder: Any = self.module.encoder  # _build_module keeps it as .encoder
        return encoder.config

    def encoder_run(self) -> EncoderRun:
        """On PyTorch the scoring dtype (``auto`` resolved on this device); on another runtime
        the precision it runs (float32 or int8), the exported ``graph`` (option ``onnx_graph``)
        and, for int8, the ``int8_recipe``."""
        cfg = self.cfg
        if cfg.runtime == "torch":
            dtype = str(scoring_dtype(str(cfg.dtype), self.device)).removeprefix("torch.")
            return EncoderRun(self.encoder_config(), dtype)
        precision = runtime_precision(cfg.runtime, str(cfg.dtype))
        recipe = {"int8_recipe": cfg.int8_recipe} if precision == INT8 else {}
        options = {"graph": cfg.onnx_graph, **recipe}
        return EncoderRun(self.encoder_config(), precision, cfg.runtime, options)

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            _ = self.module
        return self._tokenizer

    @property
    def special(self) -> SpecialIds:
        if self._special is None:
            self._special = special_ids(self.tokenizer)
        return self._special

    def _build(self, path: str, head: dict[str, Tensor] | None) -> None:
        from transformers import AutoModel, AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(path)
            # float32 whatever the checkpoint stores: transformers 5 loads a folder in its saved
            # dtype (a carried float16 copy would train and score in float16); low-precision
            # scoring casts a copy of the float32 module (CastCache)
            encoder = AutoModel.from_pretrained(path).float()
        except (OSError, ValueError) as exc:  # missing folder, bad hub id, offline hub
            raise RankerError(f"{self.name}: cannot load encoder from {path!r}: {exc}") from exc
        self._check_config(encoder.config)
        # the head's random init depends on the seed only, not on what ran before
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.cfg.seed)
            module = self._build_module(encoder)
        if head is not None:
            missing, unexpected = module.load_state_dict(head, strict=False)
            missing = [k for k in missing if not k.startswith("encoder.")]
            if missing or unexpected:
                raise RankerError(
                    f"{self.name}: checkpoint head does not fit the module "
                    f"(missing {missing}, unexpected {unexpected})"
                )
        self._module = module.to(self.device).eval()
        self._tokenizer = tokenizer
        self._special = special_ids(tokenizer)
        self._items = ItemTokens(tokenizer, self.cfg.max_item_len)
        log.info("%s: loaded %s on %s", self.name, path, self.device)

    # -- training ------------------------------------------------------------------------------
    def fit(self, train: RankingSplit, dev: RankingSplit | None = None) -> TrainingSummary:
        """Fine-tune on whole lists with ``config.loss`` (see :mod:`rankers.fit.loop`); with
        :attr:`work_dir` set, checkpoints go there and an interrupted fit resumes from them."""
        from rankers.fit.lists import fit_lists

        return fit_lists(self, train, dev, work_dir=self.work_dir)

    # -- item tokens ---------------------------------------------------------------------------
    @property
    def item_tokens(self) -> ItemTokens:
        """WordPiece ids of the items seen by :meth:`index` (others are tokenised on lookup)."""
        if self._items is None:
            _ = self.module
        assert self._items is not None
        return self._items

    def index(self, split: RankingSplit) -> None:
        """With ``pretokenise`` (default), tokenise every item of the split once."""
        if self.cfg.pretokenise:
            texts = item_texts(self.cfg, list(split.collection().values()))
            added = self.item_tokens.add(texts)
            log.debug("%s: %d items tokenised at index time", self.name, added)
        if self.cfg.runtime != "torch":  # export and compile now, never in a timed call
            self.scoring_module()

    def item_token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """WordPiece ids of items (no special tokens), cut to ``max_item_len``, after
        :func:`rankers.itemorder.item_texts` (the order ablation, for a config that declares it):
        the training path's twin of :meth:`lookup_items`, so both read items alike."""
        return token_ids(self.tokenizer, item_texts(self.cfg, texts), self.cfg.max_item_len)

    def query_tokens(self, queries: Sequence[str]) -> list[np.ndarray]:
        """WordPiece ids of each query (no special tokens), cut to ``max_query_len``."""
        ids = token_ids(self.tokenizer, queries, self.cfg.max_query_len)
        return [np.asarray(q, dtype=np.int64) for q in ids]

    def lookup_items(self, texts: Sequence[str]) -> Any:
        """Token arrays of ``texts``: from the index-time store with ``pretokenise``, else
        tokenised now (end-to-end mode: what an uncached ranker pays per call). Items pass
        through :func:`rankers.itemorder.item_texts` first, as at :meth:`index` time."""
        texts = item_texts(self.cfg, texts)
        if self.cfg.pretokenise:
            return self.item_tokens.lookup(texts)
        return self.item_tokens.tokenise(texts)

    def lookup_item_ids(self, texts: Sequence[str]) -> ItemIds:
        """The ids of ``texts`` alone (:meth:`lookup_items` without what only CROSS-JEM reads):
        what a pair encoder builds its rows from."""
        texts = item_texts(self.cfg, texts)
        if self.cfg.pretokenise:
            return self.item_tokens.lookup_ids(texts)
        arrays = self.item_tokens.tokenise(texts)
        return ItemIds(arrays.ids, arrays.lens)

    def held_rows(self, texts: Sequence[str]) -> np.ndarray | None:
        """The index-time store's rows of ``texts`` (after :func:`rankers.itemorder.item_texts`,
        as :meth:`lookup_items`); None in end-to-end mode or when one is not held, where
        :meth:`lookup_items` is the way."""
        if not self.cfg.pretokenise:
            return None
        return self.item_tokens.rows(item_texts(self.cfg, texts))

    def step_items(self, list_lengths: Sequence[int]) -> int:
        """Items of the largest list a training step holds: the longest of ``list_lengths`` or
        ``train_list_size`` (lists grown to it), cut to ``train_max_items``."""
        grown = int(getattr(self.cfg, "train_list_size", 0) or 0)
        longest = max(max(list_lengths, default=0), grown)
        cap = int(getattr(self.cfg, "train_max_items", 0) or 0)
        return min(longest, cap) if cap else longest

    def step_pass(self, list_lengths: Sequence[int]) -> tuple[int, int]:
        """(lists, items) of the largest forward/backward pass of a training step:
        ``train_batch_queries`` lists of :meth:`step_items` items, cut by ``train_micro_items``
        as the trainer cuts them (:func:`rankers.fit.lists.micro_batches`: whole lists, a long
        list in chunks only when the ranker is :attr:`pointwise`)."""
        from rankers.fit.lists import micro_batches

        cfg = self.cfg
        sizes = [self.step_items(list_lengths)] * cfg.train_batch_queries
        passes = micro_batches(sizes, cfg.train_micro_items, self.pointwise)
        largest = max(passes, key=lambda parts: sum(end - start for _, start, end in parts))
        return len(largest), sum(end - start for _, start, end in largest)

    def training_step_shape(self, list_lengths: Sequence[int]) -> tuple[int, int] | None:
        """One ``[CLS] q [SEP] item [SEP]`` sequence per item of the largest forward/backward
        pass (:meth:`step_pass`; monoBERT's and the Set-Encoder's shape, whose passes differ
        only in their unit: chunks of items for monoBERT, whole lists for the Set-Encoder;
        CROSS-JEM overrides it)."""
        cfg = self.cfg
        return self.step_pass(list_lengths)[1], cfg.max_query_len + cfg.max_item_len + 3

    def input_report(self, lists: Sequence[CandidateList]) -> dict[str, Any]:
        """Queries and items cut to ``max_query_len`` / ``max_item_len`` WordPiece tokens: how
        many, and the share of their tokens lost (distinct item texts of ``lists``)."""
        cfg = self.cfg
        queries = list(dict.fromkeys(cl.query.text for cl in lists))
        items = item_texts(cfg, list(dict.fromkeys(t for cl in lists for t in cl.texts)))
        return {
            "queries_cut": cut_counts(self.tokenizer, queries, cfg.max_query_len),
            "items_cut": cut_counts(self.tokenizer, items, cfg.max_item_len),
        }

    # -- inference helpers ---------------------------------------------------------------------
    def inference(self) -> contextlib.AbstractContextManager[None]:
        """eval mode and no autograd, the CUDA matmul mode of option ``dtype`` (TF32 for
        ``tf32`` only: :func:`~rankers.compute.precision.matmul_precision`); the dtype is the
        scoring module's (:meth:`scoring_module`)."""
        return scoring_precision(self.module, self.cfg.dtype, self.device)

    def scoring_module(self) -> nn.Module:
        """The module scoring runs: :attr:`module`, or its copy cast once to the scoring dtype,
        or (option ``runtime``) the module with its encoder on ONNX Runtime or OpenVINO
        (:mod:`rankers.compute.runtimes`; training scores in torch: ``training_precision``)."""
        cfg = self.cfg
        if cfg.runtime == "torch":
            module = self._cast.get(self.module, scoring_dtype(cfg.dtype, self.device))
            return self._graphed_module(module) if cfg.cuda_graphs else module
        precision = runtime_precision(cfg.runtime, cfg.dtype)
        fused = cfg.runtime == "onnxruntime" and cfg.onnx_graph == "fused"
        return self._runtime.get(
            self.module,
            cfg.runtime,
            precision,
            self.encoder_outputs(),
            fused=fused,
            recipe=cfg.int8_recipe,
        )

    def _graphed_module(self, module: nn.Module) -> nn.Module:
        """``module`` with its encoder through CUDA graphs (:mod:`rankers.inputs.graphs`), built
        once per scoring module (a new cast copy gets new graphs)."""
        from rankers.compute.runtimes import with_encoder
        from rankers.inputs.graphs import GraphedEncoder

        if self._graphed is None or self._graphed[0] is not module:
            inner = module.encoder
            assert isinstance(inner, nn.Module)  # _build_module keeps it as .encoder
            self._graphed = (module, with_encoder(module, GraphedEncoder(inner, self._graph_maker)))
        return self._graphed[1]

    def encoder_outputs(self) -> tuple[str, ...]:
        """The encoder outputs the module reads (an exported graph computes only these)."""
        return ("last_hidden_state",)

    def compute_dtype(self) -> str:
        """The torch dtype label, or ``<precision> (<runtime>)`` on another runtime (int8:
        ``int8 weights``)."""
        cfg = self.cfg
        if cfg.runtime == "torch":
            return super().compute_dtype()
        precision = runtime_precision(cfg.runtime, cfg.dtype)
        return f"{precision}{' weights' if precision == INT8 else ''} ({cfg.runtime})"

    # -- latency benchmark hooks ---------------------------------------------------------------
    def scoring_mode(self) -> str:
        return "pre-tokenised" if self.cfg.pretokenise else "end-to-end"

    def latency_variants(self, batch_sizes: Sequence[int] | None = None) -> list[LatencyVariant]:
        """Each base variant in both scoring modes: ``pre-tokenised`` in the ranker's column and
        ``end-to-end`` (items tokenised inside the timed call) in ``"<column> (end-to-end)"``."""
        out = []
        cfg = self.cfg
        runtime = ""  # a label names the runtime and its precision when it is not torch
        if cfg.runtime != "torch":
            runtime = f", {cfg.runtime} {runtime_precision(cfg.runtime, cfg.dtype)}"
        for flag, mode, suffix in (
            (True, "pre-tokenised", ""),
            (False, "end-to-end", " (end-to-end)"),
        ):
            for v in super().latency_variants(batch_sizes):
                out.append(
                    LatencyVariant(
                        f"{v.label} [{mode}{runtime}]",
                        {**v.options, "pretokenise": flag},
                        v.column + suffix,
                    )
                )
        return out

    def weights_note(self, checkpoint: str | None) -> str:
        if checkpoint or self.cfg.checkpoint:
            return f"trained ({checkpoint or self.cfg.checkpoint})"
        return "untrained head on the pre-trained encoder (same cost as trained)"

    # -- checkpoints ---------------------------------------------------------------------------
    def saved_parts(self) -> tuple[str, ...]:
        return (HEAD_FILE, ENCODER_DIR)

    def write_weights(self, folder: Path) -> None:
        """Encoder + tokenizer (save_pretrained) and the head weights."""
        self._write_parts(folder / ENCODER_DIR, folder / HEAD_FILE)

    def _write_parts(self, encoder_dir: Path, head_file: Path) -> None:
        """The encoder and tokenizer (save_pretrained) into ``encoder_dir``; every parameter and
        buffer of the module outside its encoder into ``head_file`` (safetensors)."""
        from safetensors.torch import save_file
        from transformers import PreTrainedModel

        module = self.module
        encoder = module.encoder
        assert isinstance(encoder, PreTrainedModel), "_build_module keeps the encoder as .encoder"
        encoder.save_pretrained(encoder_dir)
        self.tokenizer.save_pretrained(encoder_dir)
        head = {
            k: v.detach().cpu().contiguous()
            for k, v in module.state_dict().items()
            if not k.startswith("encoder.")
        }
        save_file(head, str(head_file))

    def restored_options(self, meta: dict[str, Any], folder: Path) -> dict[str, Any]:
        # fit continues a loaded checkpoint
        return {"checkpoint": str(folder)}

    def read_weights(self, folder: Path, meta: dict[str, Any]) -> None:
        from safetensors.torch import load_file

        self._base = {
            "model_id": meta.get("model_id"),
            "base_weights_hash": meta.get("base_weights_hash"),
        }
        self._build(str(folder / ENCODER_DIR), head=load_file(str(folder / HEAD_FILE)))

    # -- export (Hugging Face folder + this module's loader) -----------------------------------
    def export(self, folder: Path) -> Exported:
        """The encoder as a Hugging Face folder (``AutoModel`` loads it), the head as
        ``head.safetensors`` and the ranker's description as :data:`EXPORTED_RANKER`: no library
        has this ranker's input layout, so :meth:`from_exported` is the loader."""
        from bench.core.io import atomic_write_json
        from rankers.io.export import Exported
        from rankers.io.persist import saved_meta

        self._write_parts(folder, folder / HEAD_FILE)
        atomic_write_json(folder / EXPORTED_RANKER, saved_meta(self))
        cls = type(self)
        return Exported(
            loads_with=f"{cls.__module__}.{cls.__name__}.from_exported",
            example=(
                f"from {cls.__module__} import {cls.__name__}\n"
                f"ranker = {cls.__name__}.from_exported({{folder}})\n"
                "scores = ranker.score_texts(query, items)"
            ),
        )

    @classmethod
    def from_exported(cls, folder: Path | str, device: str = "cpu") -> EncoderRanker[Any]:
        """A ranker scoring with a folder :meth:`export` wrote: its saved options (except how to
        run: batch sizes, dtype), encoder and head."""
        from safetensors.torch import load_file

        from rankers.io.persist import restored_config

        folder = Path(folder)
        described = folder / EXPORTED_RANKER
        if not described.is_file():
            raise RankerError(f"{folder}: not an exported {cls.name} folder (no {EXPORTED_RANKER})")
        meta = json.loads(described.read_text(encoding="utf-8"))
        if meta.get("name") != cls.name:
            raise RankerError(f"{described}: exported by {meta.get('name')!r}, not {cls.name!r}")
        ranker = cls(device=device)
        # the one restore rule of a save() folder; the encoder is this folder, not a checkpoint
        restored = restored_config(ranker, meta, folder, ranker)  # it is Persistent
        ranker.config = dataclasses.replace(restored, model=str(folder), checkpoint=None)
        ranker._base = {k: meta.get(k) for k in ("model_id", "base_weights_hash")}
        ranker._build(str(folder), head=load_file(str(folder / HEAD_FILE)))
        return ranker

    # -- provenance ----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        weights = state_hash(self.module)  # loads the model first, which fills self._base
        out = {**super().describe(), **self._base, "weights_hash": weights}
        if self.cfg.runtime != "torch":
            _ = self.scoring_module()  # the session's own account (version, threads, precision)
            out["runtime"] = dict(self._runtime.info)
        return out
