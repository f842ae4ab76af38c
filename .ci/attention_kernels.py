"""Which CUDA attention kernel each CROSS-JEM layout (and monoBERT) gets, per dtype.

`make gpu-check` runs it. For each ranker it scores one list of 100 items once with
``torch.nn.functional.scaled_dot_product_attention`` wrapped to keep the arguments of the first
call (query shape, mask shape and dtype), then replays that call under each backend alone
(``torch.nn.attention.sdpa_kernel``) in PyTorch's own order of preference: the first backend that
accepts the call is the one the dispatcher picks. Flash kernels take no arbitrary mask, so rows
with padding (a mask) fall to the memory-efficient or cuDNN kernel, or to the math path.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench.data.model import Candidate, CandidateList, Query
from bench.experiments.ablate import ABLATIONS
from rankers.families.crossjem.ranker import CrossJEMRanker
from rankers.families.monobert import MonoBERTRanker

ORDER = [
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.CUDNN_ATTENTION,
    SDPBackend.MATH,
]


def one_list(tokenizer: Any, n: int = 100) -> CandidateList:
    """``n`` items of 8 distinct WordPieces each (whole words of the vocabulary), so the union
    fills several rows of different lengths: the padding a real list gives."""
    vocab = [t for t in tokenizer.convert_ids_to_tokens(range(2000, 12000)) if t.isalpha()]
    items = tuple(Candidate(f"d{i}", " ".join(vocab[8 * i : 8 * i + 8])) for i in range(n))
    return CandidateList(Query("q", " ".join(vocab[:3])), items)


def calls(ranker: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The arguments of every attention call of one scoring pass (one per layer and bucket)."""
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    real = F.scaled_dot_product_attention

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return real(*args, **kwargs)

    F.scaled_dot_product_attention = spy
    try:
        ranker.score([one_list(ranker.tokenizer)])
    finally:
        F.scaled_dot_product_attention = real
    if not seen:
        raise SystemExit(f"{ranker.name}: no scaled_dot_product_attention call seen")
    return seen


def chosen(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    for backend in ORDER:
        try:
            with sdpa_kernel([backend]):
                F.scaled_dot_product_attention(*args, **kwargs)
            return backend.name
        except RuntimeError:
            continue
    return "none"


def main(device: str) -> None:
    ab = ABLATIONS["order"]
    layouts = [("monobert", {})] + [
        (" ".join(f"{k}={v}" for k, v in ab.options(i).items()), dict(ab.options(i)))
        for i in range(len(ab.values))
    ]
    print("| ranker / layout | dtype | calls: kernel (rows x heads x length, mask) |")
    print("|---|---|---|")
    for dtype in ("float32", "bfloat16", "float16"):
        for name, options in layouts:
            cls = MonoBERTRanker if name == "monobert" else CrossJEMRanker
            ranker = cls(cls.Config.from_options({**options, "dtype": dtype}), device)
            kinds: dict[str, int] = {}
            for args, kwargs in calls(ranker):
                mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
                shape = "x".join(str(d) for d in args[0].shape[:3])
                what = (
                    f"{chosen(args, kwargs)} ({shape}, {'mask' if mask is not None else 'no mask'})"
                )
                kinds[what] = kinds.get(what, 0) + 1
            label = name if name == "monobert" else f"crossjem {name}"
            print(f"| {label} | {dtype} | {'; '.join(f'{n}x {k}' for k, n in kinds.items())} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ("cuda" if torch.cuda.is_available() else "cpu"))
