"""Old path of :mod:`bench.core.timing`, from before bench/ was split into layers:
importing it warns and hands over that module (removed in the release
:data:`bench.core.moved.REMOVED_IN` names)."""

from bench.core.moved import hand_over

hand_over(__name__)
