"""Progress lines for runs whose stderr is not a terminal (CI, redirected logs)."""

from __future__ import annotations

import logging

import pytest

from bench.core.progress import LogProgress, progress_bar


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage().split(",")[0] for r in caplog.records if r.name == "bench.core.progress"]


def test_logs_once_per_tenth_and_at_the_end(caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.INFO, logger="bench.core.progress"),
        LogProgress(25, "fit", "step") as bar,
    ):
        for _ in range(25):
            bar.update(1)
    # a tenth of 25 rounds up to 3 steps
    assert _lines(caplog) == [
        f"fit: {n}/25 step ({100 * n / 25:.0f}%)" for n in range(3, 25, 3)
    ] + ["fit: 25/25 step (100%)"]


def test_resumed_bar_starts_at_initial_and_shows_postfix(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="bench.core.progress"):
        bar = LogProgress(10, "fit", "step", initial=6)
        bar.set_postfix(loss="0.5")
        bar.update(1)
        bar.update(3)
    messages = [r.getMessage() for r in caplog.records]
    assert [m.split(",")[0] for m in messages] == ["fit: 7/10 step (70%)", "fit: 10/10 step (100%)"]
    assert messages[-1].endswith("0m00s left, loss=0.5")


def test_disabled_bar_reports_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO), progress_bar(5, "x", enabled=False) as bar:
        bar.update(5)
    assert _lines(caplog) == []
