"""CROSS-JEM (paper sections 3-4): inputs (pure Python, the oracle), packed (arrays), model
(torch) and ranker. This file imports nothing, so importing one module loads no other."""
