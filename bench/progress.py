"""Old path of :mod:`bench.core.progress` (before bench/ was split into layers), kept so
that rankers written against it still import; it warns and hands over the new module."""

import sys
import warnings

from bench.core import progress as _moved

warnings.warn(
    "bench.progress moved to bench.core.progress; the old path will be removed",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
