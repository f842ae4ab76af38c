"""Dataset adapters: every dataset, whatever its files, becomes a :class:`RankingSplit`.

On-disk layouts are registered in :mod:`bench.data.layouts` (built in: :mod:`bench.data.mteb`,
:mod:`bench.data.trec`; a new one is a module and a :func:`register_layout` call); dataset cards
(:mod:`bench.data.cards`) say which layout a dataset uses and how to score it; SODQ and
MS MARCO-Titles can be fetched when no local copy exists (:mod:`bench.data.sources`). Any folder
under the data root in either layout is a dataset named after the folder.

No imports here: a dataset is loaded by :func:`bench.data.splits.load_split`.
"""
