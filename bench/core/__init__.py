"""The lowest layer: settings, devices, progress, provenance, atomic writes, process groups,
trained-model summaries and the latency tracker's timing; imports nothing else of bench.

No imports here: cache keys hash the import closure of the code a job runs."""
