"""Function words: the tokens a ``share=function`` layout may write once per row.

Which tokens lose their place in an item decides what a sharing layout costs in accuracy. Sharing
every token held by two items (``share=all``) also takes the order of the content words that tell
answers apart; sharing only English function words and punctuation keeps every content word in
its item's order and still removes the most repeated tokens of sentence-length items (on wikiqa
test lists: "the", "of", ",", ".", "in", "is", "a", "and" are among the ten most shared).

The list is fixed in code (English; it is part of every cache key through this module's source),
and a tokenizer maps it to token ids: a vocabulary entry counts when it is one of these words
(lower-cased, as uncased WordPiece writes it) or consists of punctuation only (``##`` marks of
continuation pieces aside).
"""

from __future__ import annotations

import string
from typing import Any

#: English function words: articles, pronouns, auxiliaries, prepositions, conjunctions
FUNCTION_WORDS = frozenset(
    """
    a about above after again against all also am among an and any are as at be because been
    before being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how however i if in
    into is it its itself just may me might more most must my myself no nor not now of off on once
    only or other our ours ourselves out over own per same shall she should since so some such
    than that the their theirs them themselves then there these they this those through to too
    under until up upon very via was we were what when where which while who whom whose why will
    with within without would you your yours yourself yourselves
    """.split()  # noqa: SIM905 (a word list reads better as text)
)


def is_function_token(piece: str) -> bool:
    """Whether a vocabulary entry is a function word or punctuation."""
    bare = piece[2:] if piece.startswith("##") else piece
    if not bare:
        return False
    return piece.lower() in FUNCTION_WORDS or all(c in string.punctuation for c in bare)


def function_token_ids(tokenizer: Any) -> frozenset[int]:
    """The ids of ``tokenizer``'s vocabulary entries that are function words or punctuation."""
    vocab: dict[str, int] = tokenizer.get_vocab()
    return frozenset(i for piece, i in vocab.items() if is_function_token(piece))
