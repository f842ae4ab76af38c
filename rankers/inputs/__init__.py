"""What goes into an encoder: WordPiece ids of items (tokens), padded id arrays and list scatter
indices (batching), one host-to-device copy (transfer) and BM25 statistics (lexical).

This file imports nothing, so importing one module of the package loads no other.
"""
