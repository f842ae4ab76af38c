"""Training only: the loop every trainable ranker runs (loop), the trainers' steps - list training
(lists), the dual encoders (dense), ColBERT (colbert) - teacher targets (targets) and resumable
checkpoints (resume).

A scoring key leaves this package out (:data:`bench.execution.keys.TRAINING_ONLY_PACKAGE`); a
trained model's key covers it. This file imports nothing, so importing one module of the package
loads no other.
"""
