"""The `bench` command line (Typer): thin commands over the layers below (`bench.cli.main:app`).

The only code here is the old path ``from bench.cli import app`` (bench.cli was one module before
bench/ was split into layers), resolved lazily: no job imports the CLI, so it widens no cache key.
Like the old module paths of :data:`bench.core.moved.MOVED`, it warns (DeprecationWarning) with the
new path and the release that removes the old one.
"""

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    if name == "app":
        # stacklevel 2: the importer's line (the import machinery's own frames are skipped)
        from bench.core.moved import REMOVED_IN

        warnings.warn(
            f"bench.cli.app moved to bench.cli.main.app; the old path will be removed in "
            f"{REMOVED_IN}",
            DeprecationWarning,
            stacklevel=2,
        )
        from bench.cli.main import app

        return app
    raise AttributeError(f"module 'bench.cli' has no attribute {name!r}")
