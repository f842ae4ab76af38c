"""The `bench` command line (Typer): thin commands over the layers below (`bench.cli.main:app`).

The only code here is the old path ``from bench.cli import app`` (bench.cli was one module before
bench/ was split into layers), resolved lazily: no job imports the CLI, so it widens no cache key.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "app":
        from bench.cli.main import app

        return app
    raise AttributeError(f"module 'bench.cli' has no attribute {name!r}")
