"""ColBERT (Khattab & Zaharia, 2020) through the colbert-ai package: late interaction re-ranking.

Everything that defines ColBERT comes from colbert-ai 0.2.x, not from a copy:

* the model is colbert-ai's ``ColBERT`` (``BaseColBERT`` loading: ``HF_ColBERT`` = the BERT plus a
  bias-free linear projection to ``dim``), built from a ColBERT checkpoint folder (with its
  ``artifact.metadata``) or from any BERT base, whose projection is then freshly initialised;
* queries and documents are tokenised by its ``QueryTokenizer``/``DocTokenizer``: ``[CLS] [Q] q
  [SEP]`` padded to ``query_maxlen`` with ``[MASK]`` (query augmentation; the masks are not
  attended to unless ``attend_to_mask_tokens``, but their output vectors are kept), ``[CLS] [D] d
  [SEP]`` cut at ``doc_maxlen``; ``[Q]``/``[D]`` are the vocabulary's ``[unused0]``/``[unused1]``;
* embeddings come from ``ColBERT.query``/``ColBERT.doc`` (projection, punctuation masking of
  documents, L2 normalisation) and scores from ``ColBERT.score`` = ``colbert_score`` (MaxSim:
  for each query vector the best document vector, summed);
* training calls ``ColBERT.forward`` - the ``nway``-way softmax cross-entropy over (positive,
  negatives) of each query, plus colbert-ai's in-batch loss when ``use_ib_negatives`` - as the
  steps :class:`rankers.fit.colbert.ColBERTSteps` of the shared loop (colbert-ai's ``Trainer``
  wants its own file formats and launcher), checkpointed like every trainer, so an interrupted
  fine-tuning resumes where it stopped.

Scoring runs those steps taken apart (:mod:`rankers.families.colbert_steps`), so that nothing is
read back from the device before the scores: the masks ``ColBERT.mask`` computes from ids copied
back to the host are computed in the host step, the BERT, the projection and MaxSim run on the
uploaded ids in the model step; colbert-ai's own calls give the same scores bit for bit and stay
as the oracle (:meth:`ColBERTRanker.score_library`).

No index: candidates are encoded at query time and scored against the query directly. colbert-ai
compiles a C++ extension (``segmented_maxsim``) whenever a model is built on a machine without
GPU; it only serves ``colbert_score_packed`` (PLAID index search), which re-ranking never calls, so
model construction skips it (:func:`_no_cpp_extension`). The ranker also runs colbert-ai in float32
on whatever device it is given (colbert-ai itself would cast documents to fp16 and move scoring to
CUDA whenever a GPU is visible, whatever the requested device). So on a GPU there is no fp16 of
colbert-ai's own: document and query vectors are float32 (the projection is kept float32 over a
bf16/fp16 encoder copy, ``dtype``), and MaxSim runs in float32 on the requested device; only the
encoder runs in the ``dtype`` option's precision.

Checkpoint layout (``save(path)``): ``path/colbert/`` is a colbert-ai checkpoint (HF weights,
tokenizer, ``artifact.metadata``) loadable by colbert-ai's own ``Checkpoint``; ``path/ranker.json``
holds :meth:`ColBERTRanker.describe` and the training summary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bench.core.device import resolve_device
from bench.core.trained import TrainingSummary
from bench.data.model import CandidateList, RankingSplit
from rankers.base import (
    DTYPE_NAMES,
    RUNTIME,
    SCORE,
    TRAINING,
    Ranker,
    RankerError,
    TrainingConfig,
    inherit_option,
    option,
)
from rankers.families import colbert_compat
from rankers.hooks import Fits, LatencyParts, Persistent
from rankers.io.models import expected_new_weights, resolve_model, weights_hash
from rankers.itemorder import item_texts, sort_items_option
from rankers.trainconfig import ListTrainingConfig

if TYPE_CHECKING:
    import torch
    from colbert.modeling.colbert import ColBERT

log = logging.getLogger(__name__)

MODEL_DIR = "colbert"
#: colbert-ai's checkpoint settings file
ARTIFACT = "artifact.metadata"


@dataclass
class ColBERTRankerConfig(TrainingConfig):
    """The shared training options (:class:`~rankers.base.TrainingConfig`), scoring options, then
    ColBERT's own training options. Defaults are colbert-ai's ``ColBERTConfig``'s
    (dim 128, query_maxlen 32, cosine, punctuation masking, lr 3e-6, bsize 32, nway 2, no in-batch
    negatives, clip 2.0), except ``doc_maxlen`` 180 (the paper's MS MARCO passage setting; short
    texts are padded only to the longest in a batch, so the cap costs nothing for them). The
    CLI's settings file ``rankers/configs/colbert.yaml`` raises lr to 1e-4 and trains 3 epochs
    (tuned on wikiqa dev; colbert-ai's lr is meant for far longer runs). A loaded checkpoint
    restores the score options (:attr:`Role.SCORE <rankers.base.Role.SCORE>`)."""

    model: str = option(
        "minilm-l6",
        role=TRAINING | SCORE,
        help="alias, folder (BERT base or colbert-ai checkpoint) or Hugging Face id",
    )
    dim: int | None = option(
        None,
        role=TRAINING | SCORE,
        min=1,
        help="projection size; none keeps a checkpoint's own (128 for a new projection)",
    )
    query_maxlen: int = option(
        32, role=TRAINING | SCORE, min=4, help="query tokens, [CLS] [Q] and [SEP] included"
    )
    doc_maxlen: int = option(
        180, role=TRAINING | SCORE, min=4, help="document tokens, [CLS] [D] and [SEP] included"
    )
    similarity: str = option(
        "cosine",
        role=TRAINING | SCORE,
        choices=("cosine",),
        help="only cosine (colbert-ai's l2 path ignores the document mask)",
    )
    mask_punctuation: bool = option(
        True, role=TRAINING | SCORE, help="drop punctuation vectors of documents"
    )
    attend_to_mask_tokens: bool = option(
        False,
        role=TRAINING | SCORE,
        help="let query tokens attend to the [MASK] padding (colbert-ai default: no)",
    )
    batch_size: int = option(
        64, role=RUNTIME, min=1, help="documents (and queries) per scoring forward pass"
    )
    sort_item_tokens: bool = sort_items_option()
    dtype: str = inherit_option(
        ListTrainingConfig,
        "dtype",
        "auto",
        help="scoring precision, not part of the trained model: weights cast once to it (auto: "
        "bf16 on a GPU with native bf16, else fp16; fp32 on CPU)",
        choices=DTYPE_NAMES,
    )
    train_dtype: str = inherit_option(
        ListTrainingConfig,
        "train_dtype",
        "auto",
        help="training runs float32; dev scoring in this precision selects the epoch (auto: "
        "float32 on CPU)",
    )
    lr: float = inherit_option(TrainingConfig, "lr", 3e-6, help="AdamW learning rate")
    train_batch_size: int = option(
        32, role=TRAINING, min=1, help="queries per training step (colbert-ai bsize)"
    )
    nway: int = option(
        2,
        role=TRAINING,
        min=2,
        help="documents per query in the softmax: 1 positive + (nway - 1) list negatives",
    )
    use_ib_negatives: bool = option(
        False,
        role=TRAINING,
        help="add colbert-ai's in-batch loss (every other document of the batch is a negative)",
    )
    epochs: int = inherit_option(
        TrainingConfig, "epochs", 1, help="passes over the training triples"
    )
    max_steps: int | None = option(
        None, role=TRAINING, min=1, help="stop after this many steps in all (none: every epoch)"
    )
    warmup_steps: int = option(
        0,
        role=TRAINING,
        min=0,
        help="linear warm-up then linear decay; 0: constant lr (colbert-ai's default)",
    )
    max_grad_norm: float = inherit_option(TrainingConfig, "max_grad_norm", 2.0)
    seed: int = inherit_option(
        TrainingConfig,
        "seed",
        0,
        help="projection init (new projections), negative sampling, shuffling and dropout",
    )


# -- colbert-ai glue -------------------------------------------------------------------------------
def _import_colbert() -> Any:
    """colbert-ai's modules, made to load on transformers 5
    (:mod:`rankers.families.colbert_compat`); its
    import-time prints (faiss warning) go to the log, not stdout."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        import colbert.modeling.colbert as modeling
    colbert_compat.install()
    if buf.getvalue().strip():
        log.debug("colbert-ai: %s", buf.getvalue().strip())
    return modeling


@contextlib.contextmanager
def _no_cpp_extension() -> Iterator[None]:
    """Build a colbert-ai model without compiling ``segmented_maxsim_cpp``.

    ``ColBERT.__init__`` compiles it on every CPU-only machine unless the class already says it
    did; the extension only backs ``colbert_score_packed`` (index search), never used here. The
    flag is set for the duration of the construction only, so code that does want the extension
    still gets it built on its first model.
    """
    cls = _import_colbert().ColBERT
    had = "loaded_extensions" in cls.__dict__
    if not had:
        cls.loaded_extensions = True
    try:
        yield
    finally:
        if not had:
            del cls.loaded_extensions


def _has_projection(path: str) -> bool | None:
    """Whether the folder's weights contain ColBERT's ``linear.weight`` (None: cannot tell)."""
    files = sorted(Path(path).glob("*.safetensors")) if Path(path).is_dir() else []
    if not files:
        return None
    from safetensors import safe_open

    for f in files:
        with safe_open(str(f), framework="pt") as fh:
            names = list(fh.keys())
        if any(k == "linear.weight" or k.endswith(".linear.weight") for k in names):
            return True
    return False


def _host_arrays(tensorize: Any, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """A colbert-ai tokenizer's ids and attention mask of ``texts`` as host arrays (empty ones
    for no text, which colbert-ai's tokenizers refuse)."""
    if not texts:
        return np.zeros((0, 0), np.int64), np.zeros((0, 0), np.int64)
    ids, mask = tensorize(texts)
    return ids.cpu().numpy(), mask.cpu().numpy()


@dataclass
class PreparedColBERT:
    """One scoring call after the host step: the uploaded ``tensors`` (query ids, attention and
    kept-vector masks; the same of the documents, sorted by length, with each one's query row),
    the query batches ``(start, end, full)``, the document batches ``(start, end, width,
    full)`` (``full``: every token of the batch attended), the length ``order`` of the
    documents and the list sizes."""

    tensors: dict[str, torch.Tensor]
    query_batches: list[tuple[int, int, bool]]
    doc_batches: list[tuple[int, int, int, bool]]
    order: np.ndarray
    n_items: list[int]


class ColBERTRanker(Ranker[ColBERTRankerConfig], LatencyParts, Fits, Persistent):
    """MaxSim re-ranking with a colbert-ai model; candidates are encoded at query time."""

    name: ClassVar[str] = "colbert"
    family: ClassVar[str] = "late"
    Config = ColBERTRankerConfig
    pointwise: ClassVar[bool] = True
    trainable: ClassVar[bool] = True

    def __init__(self, config: ColBERTRankerConfig | None = None, device: str = "cpu") -> None:
        super().__init__(config, device)
        self.device = resolve_device(device)
        self._model: ColBERT | None = None
        self._qtok: Any = None
        self._dtok: Any = None
        self._provenance: dict[str, Any] = {}
        self.training_summary: TrainingSummary | None = None
        from rankers.compute.precision import CastCache

        # the projection stays float32 over a bf16 encoder, so MaxSim runs on float32 vectors
        self._cast: CastCache[ColBERT] = CastCache(lambda m: [m.linear])

    def untrained_weights(self) -> str | None:
        if self.training_summary is not None or self._provenance.get("checkpoint"):
            return None
        path = resolve_model(self.cfg.model).path  # a hub id: a ColBERT checkpoint is assumed
        if Path(path).is_dir() and _has_projection(path) is False:
            return "the ColBERT projection on a bare BERT"
        return None

    # -- model ---------------------------------------------------------------------------------
    @property
    def colbert(self) -> ColBERT:
        """colbert-ai's ``ColBERT`` module, loaded on first use (eval mode, on ``device``)."""
        if self._model is None:
            ref = resolve_model(self.cfg.model)
            self._provenance = {
                "model_id": ref.model_id,
                "base_weights_hash": weights_hash(ref.path) if ref.local else None,
            }
            self._build(ref.path)
        assert self._model is not None
        return self._model

    def scoring_model(self) -> ColBERT:
        """:attr:`colbert`, or its copy cast once to the scoring dtype (see ``dtype``)."""
        from rankers.compute.precision import scoring_dtype

        return self._cast.get(self.colbert, scoring_dtype(self.cfg.dtype, self.device))

    def weights_note(self, checkpoint: str | None) -> str:
        if checkpoint or self._provenance.get("checkpoint"):
            return f"trained ({checkpoint or self._provenance.get('checkpoint')})"
        return "untrained projection on the pre-trained encoder (same cost as trained)"

    @property
    def query_tokenizer(self) -> Any:
        """colbert-ai ``QueryTokenizer`` ([Q] marker, [MASK] augmentation to query_maxlen)."""
        _ = self.colbert
        return self._qtok

    @property
    def doc_tokenizer(self) -> Any:
        """colbert-ai ``DocTokenizer`` ([D] marker, truncation at doc_maxlen)."""
        _ = self.colbert
        return self._dtok

    def _colbert_settings(self) -> dict[str, Any]:
        cfg = self.cfg
        settings = {
            "query_maxlen": cfg.query_maxlen,
            "doc_maxlen": cfg.doc_maxlen,
            "similarity": cfg.similarity,
            "mask_punctuation": cfg.mask_punctuation,
            "attend_to_mask_tokens": cfg.attend_to_mask_tokens,
            "nway": cfg.nway,
            "use_ib_negatives": cfg.use_ib_negatives,
            "bsize": cfg.train_batch_size,
            "lr": cfg.lr,
        }
        if cfg.dim is not None:  # unassigned keys keep the checkpoint's values
            settings["dim"] = cfg.dim
        return settings

    def _build(self, path: str) -> None:
        """Load ``path`` through colbert-ai; a missing projection is initialised from the seed."""
        import torch

        modeling = _import_colbert()
        from colbert.infra import ColBERTConfig
        from colbert.modeling.tokenization import DocTokenizer, QueryTokenizer

        if Path(path).exists():
            # absolute: colbert-ai first tries a path as a hub repo id, which a '/...' never is
            path = str(Path(path).resolve())
        colbert_config = ColBERTConfig(checkpoint=path, **self._colbert_settings())
        has = _has_projection(path)
        new_projection = (
            expected_new_weights(f"colbert projection linear.weight (seed {self.cfg.seed})")
            if has is False
            else contextlib.nullcontext()
        )
        try:
            with _no_cpp_extension(), torch.random.fork_rng(devices=[]), new_projection:
                torch.manual_seed(self.cfg.seed)
                model = modeling.ColBERT(path, colbert_config=colbert_config)
            qtok = QueryTokenizer(model.colbert_config, verbose=0)
            dtok = DocTokenizer(model.colbert_config)
        except (OSError, ValueError, RuntimeError) as exc:
            raise RankerError(
                f"colbert: cannot load {self.cfg.model!r} from {path}: {exc}"
            ) from exc
        # float32 on the requested device: colbert-ai keys fp16 and CUDA off "a GPU is visible"
        model.use_gpu = False
        model.colbert_config.total_visible_gpus = 0
        if not hasattr(model, "skiplist"):  # colbert-ai sets it only with mask_punctuation
            model.skiplist = {}
        # float32 also from a float16 checkpoint (transformers 5 keeps the saved dtype)
        self._model = model.float().to(self.device).eval()
        self._qtok, self._dtok = qtok, dtok
        if has is None:
            self._provenance["projection"] = "unknown (no local safetensors)"
        else:
            self._provenance["projection"] = (
                "from checkpoint" if has else f"new (seed {self.cfg.seed})"
            )
        log.info("colbert: loaded %s on %s (projection %s)", path, self.device, self._provenance)

    def inference(self) -> contextlib.AbstractContextManager[None]:
        """eval mode and no autograd, restoring the previous mode afterwards."""
        from rankers.compute.precision import evaluating  # torch, imported when first scoring

        return evaluating(self.colbert)

    # -- encoding and scoring ------------------------------------------------------------------
    def encode_queries(self, queries: Sequence[str]) -> torch.Tensor:
        """(n, query_maxlen, dim) normalised query vectors, [MASK] augmentation included."""
        import torch

        model = self.scoring_model()
        if not queries:
            return torch.zeros(0, self.cfg.query_maxlen, model.colbert_config.dim)
        ids, mask = self.query_tokenizer.tensorize(list(queries))
        step = self.cfg.batch_size
        with self.inference():
            parts = [
                model.query(ids[i : i + step], mask[i : i + step])
                for i in range(0, len(queries), step)
            ]
        return torch.cat(parts)

    def tensorize_documents(self, docs: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """colbert-ai's document ids and mask of ``docs``, after
        :func:`rankers.itemorder.item_texts` (the order ablation): the one place scoring and
        training tokenise documents, so both read them alike."""
        ids, mask = self.doc_tokenizer.tensorize(list(item_texts(self.cfg, docs)))
        # host tensors whatever colbert-ai did with them: scoring sorts and slices them with
        # NumPy, and colbert-ai's doc() uploads each batch (on a GPU its tokenizer's mask came
        # back on the device, and scoring failed converting it to NumPy)
        return ids.cpu(), mask.cpu()

    def encode_documents(self, docs: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(n, longest, dim) document vectors and (n, longest) mask (False: padding/punctuation)."""
        ids, mask = self.tensorize_documents(docs)
        with self.inference():
            D, D_mask = self.scoring_model().doc(ids, mask, keep_dims="return_mask")
        return D, D_mask.squeeze(-1)

    host_step: ClassVar[str | None] = (
        "colbert-ai's query and document tokenisation, the punctuation and padding masks "
        "(ColBERT.mask) and the length sort of the documents; one host-to-device copy per call"
    )

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        """MaxSim of each candidate with its query (colbert-ai ``ColBERT.score``).

        All candidates of the call are sorted by token length and encoded ``batch_size`` at a
        time, each batch cut to its own longest document, so padding stays small.
        """
        return self.score_prepared(self.prepare_scoring(lists))

    def prepare_scoring(self, lists: Sequence[CandidateList]) -> PreparedColBERT:
        """colbert-ai's tokenisation of the queries and documents, ``ColBERT.mask`` on the host
        (:func:`~rankers.families.colbert_steps.keep_mask`), the documents sorted by length and
        each document's query row; everything in one upload."""
        from rankers.families.colbert_steps import keep_mask
        from rankers.inputs.transfer import upload

        model = self.colbert
        texts = [t for cl in lists for t in cl.texts]
        q_ids, q_att = _host_arrays(self.query_tokenizer.tensorize, [cl.query.text for cl in lists])
        d_ids, d_att = _host_arrays(self.tensorize_documents, texts)
        length = d_att.sum(axis=1)
        order = np.argsort(length, kind="stable")
        step = self.cfg.batch_size
        queries = [
            (s, min(s + step, len(q_ids)), bool(q_att[s : s + step].all()))
            for s in range(0, len(q_ids), step)
        ]
        docs = []
        for s in range(0, len(order), step):
            rows = order[s : s + step]
            width = int(length[rows].max())
            docs.append((s, s + len(rows), width, bool(d_att[rows, :width].all())))
        owner = np.repeat(np.arange(len(lists)), [len(cl) for cl in lists])
        tensors = upload(
            {
                "q_ids": q_ids,
                "q_att": q_att,
                "q_keep": keep_mask(q_ids, model.pad_token, {}),
                "d_ids": d_ids[order],
                "d_att": d_att[order],
                "d_keep": keep_mask(d_ids[order], model.pad_token, model.skiplist),
                "owner": owner[order],
            },
            self.device,
        )
        return PreparedColBERT(tensors, queries, docs, order, [len(cl) for cl in lists])

    def score_prepared(self, prepared: PreparedColBERT) -> list[np.ndarray]:
        """The model step: the query and document vectors
        (:func:`~rankers.families.colbert_steps.vectors`) and MaxSim
        (:func:`~rankers.families.colbert_steps.maxsim`) on the device, one copy back."""
        import torch

        from rankers.families.colbert_steps import maxsim, vectors

        p, t = prepared, prepared.tensors
        flat = np.zeros(len(p.order), dtype=np.float32)
        if p.doc_batches:
            model = self.scoring_model()
            parts = []
            with self.inference():
                Q = torch.cat(
                    [
                        vectors(model, t["q_ids"][s:e], t["q_att"][s:e], t["q_keep"][s:e], full)
                        for s, e, full in p.query_batches
                    ]
                )
                for s, e, width, full in p.doc_batches:
                    keep = t["d_keep"][s:e, :width]
                    D = vectors(model, t["d_ids"][s:e, :width], t["d_att"][s:e, :width], keep, full)
                    parts.append(maxsim(Q[t["owner"][s:e]], D, keep).float().reshape(-1))
            flat[p.order] = torch.cat(parts).cpu().numpy()
        bounds = np.cumsum([0, *p.n_items])
        return [flat[bounds[k] : bounds[k + 1]].copy() for k in range(len(p.n_items))]

    def score_library(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        """:meth:`score` through colbert-ai's own ``query``, ``doc`` and ``score`` (the simple
        implementation, kept as the oracle of :meth:`score_prepared`; they read the ids and
        the document mask back from the device)."""
        import torch

        from rankers.inputs.transfer import upload

        if not lists:
            return []
        model = self.scoring_model()
        Q = self.encode_queries([cl.query.text for cl in lists])
        texts = [t for cl in lists for t in cl.texts]
        flat = np.zeros(len(texts), dtype=np.float32)
        if texts:
            # ids, mask and the sort stay on the host (colbert-ai's doc() uploads each batch);
            # each document's query row goes to the device once, scores come back once
            ids, mask = self.tensorize_documents(texts)  # host tensors (colbert-ai tokenizer)
            lengths = mask.sum(dim=1).numpy()
            order = np.argsort(lengths, kind="stable")
            owner = np.repeat(np.arange(len(lists)), [len(cl) for cl in lists])
            owner_dev = upload({"owner": owner[order]}, str(Q.device))["owner"]
            parts = []
            with self.inference():
                for start in range(0, len(order), self.cfg.batch_size):
                    idx = torch.from_numpy(order[start : start + self.cfg.batch_size])
                    width = int(lengths[idx.numpy()].max())
                    D, D_mask = model.doc(
                        ids[idx, :width], mask[idx, :width], keep_dims="return_mask"
                    )
                    rows = owner_dev[start : start + len(idx)]
                    parts.append(model.score(Q[rows], D, D_mask).float().reshape(-1))
            flat[order] = torch.cat(parts).cpu().numpy()
        bounds = np.cumsum([0] + [len(cl) for cl in lists])
        return [flat[bounds[k] : bounds[k + 1]].copy() for k in range(len(lists))]

    # -- training ------------------------------------------------------------------------------
    def fit(self, train: RankingSplit, dev: RankingSplit | None = None) -> TrainingSummary:
        """Fine-tune with colbert-ai's objective by the shared loop
        (:func:`rankers.fit.colbert.fit_colbert`); the epoch with the best dev AP@10 is kept.

        With :attr:`work_dir` set, the full state is checkpointed there at every epoch end (and
        every ``checkpoint_steps`` steps) and an interrupted fit resumes from it.
        """
        from rankers.fit.colbert import fit_colbert

        self.training_summary = fit_colbert(self, train, dev)
        return self.training_summary

    # -- persistence ---------------------------------------------------------------------------
    def saved_parts(self) -> tuple[str, ...]:
        return (MODEL_DIR,)

    def write_weights(self, folder: Path) -> None:
        """``folder/colbert``: a colbert-ai checkpoint.

        Written with Hugging Face ``save_pretrained`` plus colbert-ai's config export rather than
        ``BaseColBERT.save``, whose metadata step asks GitPython for the current branch and
        raises on a detached HEAD (CI checkouts).
        """
        target = folder / MODEL_DIR
        target.mkdir(parents=True, exist_ok=True)
        model = self.colbert
        model.model.save_pretrained(str(target))
        model.raw_tokenizer.save_pretrained(str(target))
        from colbert.infra.config.settings import RunSettings

        # model settings only: run settings (cwd, timestamps, GPUs) and the location are not
        run_keys = {f.name for f in dataclasses.fields(RunSettings)} | {"checkpoint"}
        settings = {k: v for k, v in model.colbert_config.export().items() if k not in run_keys}
        (target / ARTIFACT).write_text(json.dumps(settings, indent=2, default=str))

    def restored_options(self, meta: dict[str, Any], folder: Path) -> dict[str, Any]:
        return {"dim": meta.get("dim", meta["config"].get("dim", self.cfg.dim))}

    def read_weights(self, folder: Path, meta: dict[str, Any]) -> None:
        # the base it was built from: labels and model_id
        self._provenance = {
            "model_id": meta.get("model_id"),
            "base_weights_hash": meta.get("base_weights_hash"),
            "checkpoint": str(folder),
        }
        self._build(str(folder / MODEL_DIR))

    # -- provenance ----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        from importlib.metadata import version

        from rankers.io.models import state_hash

        model = self.colbert
        return {
            **super().describe(),
            **self._provenance,
            "weights_hash": state_hash(model),
            "hidden_size": int(model.bert.config.hidden_size),
            "dim": int(model.colbert_config.dim),
            "backbone": type(model.bert).__name__,
            "colbert_ai": version("colbert-ai"),
            "scoring": "MaxSim (colbert-ai ColBERT.score) at query time, no index",
            "fine_tuned": self.training_summary is not None,
        }


__all__ = ["ColBERTRanker", "ColBERTRankerConfig"]
