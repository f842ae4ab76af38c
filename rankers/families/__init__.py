"""The ranker families, one module (or package) each; the registry in ``rankers/__init__.py``
names them. This file imports nothing, so importing one family loads no other.
"""
