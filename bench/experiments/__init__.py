"""Several jobs as one experiment: the demo suite, sweeps and ablations.

No imports here: cache keys hash the import closure of the code a job runs."""
