"""The `bench` command line (Typer): thin commands over the layers below.

No imports here: cache keys hash the import closure of the code a job runs."""
