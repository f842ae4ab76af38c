"""Weights in and out: model aliases and folders (models), save/load of ranker folders
(persist), and export for other libraries (export).

This file imports nothing, so importing one module of the package loads no other.
"""
