"""Old path of :mod:`rankers.io.persist`, from before rankers/ was split into machinery packages and
families: importing it warns and hands over that module (removed in the release
:data:`bench.core.moved.REMOVED_IN` names)."""

from bench.core.moved import hand_over

hand_over(__name__)
