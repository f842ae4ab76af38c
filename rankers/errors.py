"""The error every ranker raises (its own module, so that :mod:`rankers.io.persist` and
:mod:`rankers.base` can both use it without importing each other)."""


class RankerError(RuntimeError):
    """A ranker cannot do what was asked (bad option, missing checkpoint, untrainable...)."""
