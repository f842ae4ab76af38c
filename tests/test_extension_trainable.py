"""A new *trainable* ranker is one module plus one registry line, with no save/load of its own
(issue 19 item 4).

The toy ranker below lives in a module written under ``tmp_path``, declares its training step
(the :class:`rankers.fit.loop.Trainable` protocol) and nothing about persistence: the one helper
of :mod:`rankers.io.persist` writes and restores it. It must then go through ``train``, ``run``,
``sweep`` and ``ablate`` end to end, and a trained model must come back with the exact weights
it was trained to (its weights hash), or be refused with a message naming the damage.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from toydata import write_toy_mteb
from typer.testing import CliRunner

import rankers
from bench.cli.main import app
from bench.results.cache import MANIFEST, manifest_problem

runner = CliRunner()

#: a learned weight of the shared-word count; trains on the shared loop, persists through the helper
TOY_MODULE = textwrap.dedent(
    '''
    """A learned weight of the words shared with the query: a trainable ranker kept outside."""

    from __future__ import annotations

    import dataclasses
    import random
    from collections.abc import Sequence
    from typing import Any

    import numpy as np
    import torch
    from torch import nn

    from bench.data.model import CandidateList, RankingSplit, relevant
    from bench.core.trained import TrainingSummary
    from rankers.base import SCORE, TRAINING, Ranker, TrainingConfig, inherit_option, option
    from rankers.itemorder import sort_items_option
    from rankers.fit.resume import split_key
    from rankers.fit.loop import LoopPlan, train_loop


    @dataclasses.dataclass
    class WordsConfig(TrainingConfig):
        scale: float = option(1.0, role=TRAINING | SCORE, min=0, help="feature scale")
        sort_item_tokens: bool = sort_items_option()
        lr: float = inherit_option(TrainingConfig, "lr", 0.5)
        epochs: int = inherit_option(TrainingConfig, "epochs", 2)


    class Weights(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.zeros(1))
            self.b = nn.Parameter(torch.zeros(1))


    class WordsRanker(Ranker):
        name = "words"
        family = "learned-toy"
        Config = WordsConfig
        pointwise = True
        trainable = True

        def __init__(self, config: Any = None, device: str = "cpu") -> None:
            super().__init__(config, device)
            self.module = Weights()
            self.training_summary: TrainingSummary | None = None
            self._examples: list[tuple[float, float]] = []

        def untrained_weights(self) -> str | None:
            return "zero word weights"

        def _shared(self, query: str, text: str) -> float:
            return self.config.scale * len(set(query.split()) & set(text.split()))

        def _logit(self, module: nn.Module, shared: float) -> torch.Tensor:
            return (module.w * shared + module.b).sum()

        def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
            with torch.no_grad():
                return [
                    np.array(
                        [float(self._logit(self.module, self._shared(cl.query.text, c.text)))
                         for c in cl.candidates],
                        dtype=np.float64,
                    )
                    for cl in lists
                ]

        # -- the Trainable protocol: the loop does the rest, rankers.io.persist the saving --
        def training_module(self) -> nn.Module:
            return self.module

        def epoch_batches(self, train: RankingSplit, epoch: int) -> list[list[int]]:
            order = list(range(len(self._examples)))
            random.Random(self.config.seed * 1000 + epoch).shuffle(order)
            return [order[i : i + 4] for i in range(0, len(order), 4)]

        def batch_loss(self, batch: list[int], module: nn.Module) -> torch.Tensor:
            logits = torch.stack([self._logit(module, self._examples[i][0]) for i in batch])
            labels = torch.tensor([self._examples[i][1] for i in batch])
            return nn.functional.binary_cross_entropy_with_logits(logits, labels)

        def fit(self, train: RankingSplit, dev: RankingSplit | None = None) -> TrainingSummary:
            self._examples = [
                (self._shared(cl.query.text, c.text),
                 float(c.docid in relevant(train.qrels, cl.query.qid, train.relevance_level)))
                for cl in train.lists
                for c in cl.candidates
            ]
            plan = LoopPlan.of(self.config, data=split_key(train), describe="toy pairs")
            self.training_summary = train_loop(self, self, train, dev, plan)
            return self.training_summary
    '''
)


@pytest.fixture()
def toy_trainable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Write the module and register it (the one line a new ranker needs); returns the data."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "toy_words.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(plugin))
    monkeypatch.setattr(rankers, "_REGISTRY", dict(rankers._REGISTRY))
    monkeypatch.setattr(rankers, "_CONFIG_FILES", dict(rankers._CONFIG_FILES))
    monkeypatch.delitem(sys.modules, "toy_words", raising=False)
    rankers.register("words", "toy_words:WordsRanker")
    data = tmp_path / "data"
    write_toy_mteb(data / "toy")
    monkeypatch.setenv("BENCH_DATA_DIR", str(data))
    return data


def _ok(args: list[str]) -> str:
    result = runner.invoke(app, ["-q", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _models(results_dir: Path) -> list[Path]:
    return sorted(
        p.parent for p in (results_dir / "models" / "toy" / "words").glob("*/ranker.json")
    )


def test_trainable_toy_ranker_trains_runs_sweeps_and_ablates(
    toy_trainable: Path, results_dir: Path
) -> None:
    from rankers import create_ranker
    from rankers.io.models import state_hash
    from rankers.io.persist import WEIGHTS_FILE

    _ok(["train", "-r", "words", "-d", "toy", "--device", "cpu"])
    (model,) = _models(results_dir)
    assert (model / WEIGHTS_FILE).is_file() and (model / MANIFEST).is_file()
    assert manifest_problem(model) is None
    trained = json.loads((model / "training.json").read_text())
    saved = json.loads((model / "ranker.json").read_text())
    assert saved["name"] == "words" and saved["training"]["weights_hash"] == trained["weights_hash"]

    # restored through the one helper: the very weights training ended with
    restored = create_ranker("words", {}, device="cpu")
    restored.load(model)
    assert state_hash(restored.module) == trained["weights_hash"]
    assert restored.training_summary is not None
    assert restored.training_summary.to_json() == saved["training"]

    # run reuses the trained model (no second folder) and ranks the shared-word positive first
    _ok(["run", "-r", "words", "-d", "toy", "--split", "test", "--device", "cpu"])
    assert _models(results_dir) == [model]
    (record_file,) = results_dir.glob("runs/toy/words/*/record.json")
    record = json.loads(record_file.read_text())
    assert record["metrics"]["P@1"] == 1.0
    assert record["provenance"]["ranker"]["family"] == "learned-toy"

    # sweep: lr=0.5 is the trained model's setting (reused), lr=1.0 trains one more
    _ok(["sweep", "-r", "words", "-d", "toy", "--no-write", "--set", "lr=0.5,1.0"])
    assert len(_models(results_dir)) == 2

    # ablate: sort_item_tokens=false is the first model again, true trains a third
    _ok(["ablate", "-d", "toy", "--what", "item-order", "-r", "words", "--device", "cpu"])
    assert len(_models(results_dir)) == 3
    for folder in _models(results_dir):
        assert manifest_problem(folder) is None


def test_damaged_toy_model_is_refused_naming_the_file(
    toy_trainable: Path, results_dir: Path, tmp_path: Path
) -> None:
    from rankers import RankerError, create_ranker
    from rankers.io.persist import WEIGHTS_FILE

    ranker = create_ranker("words", {}, device="cpu")
    ranker.module.w.data += 1.0
    folder = tmp_path / "saved"
    ranker.save(folder)
    assert manifest_problem(folder) is None
    assert not [p for p in folder.iterdir() if p.name.startswith(".saving")]  # staging removed
    weights = folder / WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:-8])
    with pytest.raises(RankerError, match=WEIGHTS_FILE):
        create_ranker("words", {}, device="cpu").load(folder)
    # a save over it replaces the damaged files; a folder of another ranker is refused by name
    ranker.save(folder)
    assert manifest_problem(folder) is None
    (folder / MANIFEST).unlink()
    meta = json.loads((folder / "ranker.json").read_text())
    (folder / "ranker.json").write_text(json.dumps({**meta, "name": "overlap"}))
    with pytest.raises(RankerError, match="saved by ranker 'overlap', not 'words'"):
        create_ranker("words", {}, device="cpu").load(folder)
