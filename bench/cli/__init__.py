"""The `bench` command line (Typer): thin commands over the layers below (`bench.cli.main:app`).

No imports here: no job imports the CLI, and a package's ``__init__`` joins the import closure
that cache keys hash.
"""
