"""Progress reporting for long loops: a tqdm bar on a terminal, log lines everywhere else.

tqdm with ``disable=None`` turns itself off when stderr is not a terminal, which left hour-long
training runs in CI and in redirected logs silent until they ended. :func:`progress_bar` keeps the
bar on a terminal and otherwise logs a line every tenth of the work (with rate and time left).
"""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType
from typing import Any, Protocol

from rich.console import Console

log = logging.getLogger(__name__)

#: where messages to the user go (stderr; wide enough for paths when it is not a terminal)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


class ProgressBar(Protocol):
    """The part of tqdm's interface the harness uses."""

    def update(self, n: int = 1) -> Any: ...

    def set_postfix(self, **kwargs: Any) -> Any: ...

    def __enter__(self) -> ProgressBar: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any: ...


class LogProgress:
    """Logs ``desc: done/total unit (pct), rate, time left, postfix`` at each tenth of the work."""

    def __init__(self, total: int, desc: str, unit: str = "it", initial: int = 0) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.n, self._start_n = initial, initial
        self._postfix: dict[str, Any] = {}
        self._start = time.perf_counter()
        self._next = self._threshold(initial)

    def _threshold(self, n: int) -> int:
        """The first tenth of ``total`` strictly above ``n``."""
        step = max(1, -(-self.total // 10))
        return (n // step + 1) * step

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.n >= self._next or self.n == self.total:
            self._next = self._threshold(self.n)
            self._report()

    def set_postfix(self, **kwargs: Any) -> None:
        self._postfix = kwargs

    def _report(self) -> None:
        elapsed = time.perf_counter() - self._start
        done = self.n - self._start_n
        rate = done / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.n) / rate if rate > 0 else float("nan")
        extra = "".join(f", {k}={v}" for k, v in self._postfix.items())
        pct = 100.0 * self.n / self.total if self.total else 100.0
        log.info(
            "%s: %d/%d %s (%.0f%%), %.2f %s/s, %s left%s",
            self.desc,
            self.n,
            self.total,
            self.unit,
            pct,
            rate,
            self.unit,
            _duration(left),
            extra,
        )

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


def _duration(seconds: float) -> str:
    if seconds != seconds:  # NaN: no rate yet
        return "?"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def progress_bar(
    total: int, desc: str, unit: str = "it", *, initial: int = 0, enabled: bool = True
) -> ProgressBar:
    """A tqdm bar when stderr is a terminal, else a :class:`LogProgress`; nothing if disabled."""
    from tqdm.auto import tqdm

    if not enabled:
        return tqdm(total=total, disable=True)
    if sys.stderr.isatty():
        return tqdm(total=total, desc=desc, unit=unit, initial=initial)
    return LogProgress(total, desc, unit, initial)


__all__ = ["LogProgress", "ProgressBar", "progress_bar"]
