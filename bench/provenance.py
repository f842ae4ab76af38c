"""Old path of :mod:`bench.core.provenance` (before bench/ was split into layers), kept so
that rankers written against it still import; it warns and hands over the new module."""

import sys
import warnings

from bench.core import provenance as _moved

warnings.warn(
    "bench.provenance moved to bench.core.provenance; the old path will be removed",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
