"""The old module paths of :data:`bench.MOVED`: each is a module of two lines that calls
:func:`hand_over`, so a ranker written before bench/ was split into layers keeps importing."""

from __future__ import annotations

import importlib
import sys
import warnings

from bench import MOVED


def hand_over(old: str) -> None:
    """Make module ``old`` the module it moved to (the same object, private names and
    monkeypatching included), warning the importer once with the new path."""
    new = MOVED[old]
    warnings.warn(
        f"{old} moved to {new}; the old path will be removed", DeprecationWarning, stacklevel=3
    )
    sys.modules[old] = importlib.import_module(new)
