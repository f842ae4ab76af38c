"""Running jobs: the context of a command, its plan, cache keys, scoring and fitting, the runner,
process launches and the selection of current records.

No imports here: cache keys hash the import closure of the code a job runs."""
