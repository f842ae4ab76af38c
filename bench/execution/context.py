"""The run context: where and how one command runs, resolved once at its start and passed down.

A command (``bench run``, ``train``, ``demo``, ``ablate``, ``latency``) resolves its context once -
the device (``auto`` becomes ``cuda`` or ``cpu``, a missing GPU fails here), torch's thread count,
the data and results roots - and hands it to the runner or the latency benchmark, which use it
instead of resolving their own. The seed is kept as a value: every run re-seeds from it
(:meth:`RunContext.seed_everything`), so a result does not depend on what the command ran before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.device import resolve_device, seed_everything, set_threads
from bench.core.settings import data_root, results_root
from bench.data.splits import Dataset


@dataclass(frozen=True)
class RunContext:
    """The resolved device, seed, torch thread count in force, data root and results root."""

    device: str
    seed: int
    threads: int
    data_root: Path
    results_root: Path
    #: the datasets this command has resolved, by name (:meth:`dataset`)
    _datasets: dict[str, Dataset] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def resolve(
        cls,
        *,
        device: str = "auto",
        seed: int = 0,
        threads: int | None = None,
        data_dir: str | Path | None = None,
        results_dir: str | Path | None = None,
    ) -> RunContext:
        """Resolve ``device`` (ValueError for an unknown one or a missing GPU), set torch's
        intra-op threads (None keeps torch's default) and resolve the roots (``--data-dir``, else
        ``$BENCH_DATA_DIR``...; see :mod:`bench.core.settings`)."""
        return cls(
            device=resolve_device(device),
            seed=seed,
            threads=set_threads(threads),
            data_root=data_root(data_dir),
            results_root=results_root(results_dir),
        )

    @classmethod
    def of(cls, options: Any) -> RunContext:
        """The context of any options object with ``device``, ``seed``, ``threads``,
        ``data_dir`` and ``results_dir`` attributes (a run's or a latency benchmark's)."""
        return cls.resolve(
            device=options.device,
            seed=options.seed,
            threads=options.threads,
            data_dir=options.data_dir,
            results_dir=options.results_dir,
        )

    def dataset(self, name: str) -> Dataset:
        """Dataset ``name`` under :attr:`data_root`, resolved on first use and then reused for
        the rest of the command (root, card, splits on disk)."""
        if name not in self._datasets:
            self._datasets[name] = Dataset.resolve(name, self.data_root)
        return self._datasets[name]

    def seed_everything(self) -> None:
        """Seed python, numpy and torch from :attr:`seed` (at the start of every run)."""
        seed_everything(self.seed)
