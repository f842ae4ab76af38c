"""`python -m bench.cli`: the `bench` command."""

from bench.cli.main import main

main()
