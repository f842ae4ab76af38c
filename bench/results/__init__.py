"""Rankings, metrics, significance, result records and the cache: what a scored run becomes.

No imports here: cache keys hash the import closure of the code a job runs."""
