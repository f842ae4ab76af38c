"""A training run that dies right after publishing a checkpoint, for the resume tests of the
trainers that run on :func:`rankers.fit.loop.train_loop` (ColBERT, the dual encoders)."""

from __future__ import annotations

from typing import Any

import pytest


class Crash(Exception):
    """Stands for the process dying right after a checkpoint was published."""


def die_after_checkpoint(monkeypatch: pytest.MonkeyPatch, step: int) -> list[int]:
    """Make every published checkpoint append its step to the returned list, and the one of
    ``step`` raise :class:`Crash` once published (the state on disk is then complete)."""
    import rankers.fit.resume as resume

    real_save = resume.save_checkpoint
    saved: list[int] = []

    def save_then_die(accelerator: Any, folder: Any, key: str, progress: Any) -> Any:
        final = real_save(accelerator, folder, key, progress)
        saved.append(progress.step)
        if progress.step == step:
            raise Crash(final)
        return final

    monkeypatch.setattr(resume, "save_checkpoint", save_then_die)
    return saved
