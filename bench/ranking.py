"""Old path of :mod:`bench.results.ranking` (before bench/ was split into layers), kept so
that rankers written against it still import; it warns and hands over the new module."""

import sys
import warnings

from bench.results import ranking as _moved

warnings.warn(
    "bench.ranking moved to bench.results.ranking; the old path will be removed",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
