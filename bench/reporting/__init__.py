"""Tables, plots, checks, reports and the README/docs tables rendered from records.

No imports here: cache keys hash the import closure of the code a job runs."""
