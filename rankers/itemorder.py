"""The order ablation of item text: every item's words sorted alphabetically (option
``sort_item_tokens``).

The paper's appendix ("Ablation on Sequence Information", Table ``table_motivation`` (a)) trains
and tests a cross-encoder on items whose tokens are sorted alphabetically, to measure what word
order inside an item is worth; CROSS-JEM's sorted token union loses that order by design. Sorting
WordPiece tokens would tear ``##`` continuations away from their word (``play ##ing`` ->
``##ing play``), which is not the text any tokenizer produces, so the harness sorts whole
*words*: the item's whitespace-separated words, each kept as written (so a word's pieces, and
punctuation attached to it, stay together), ordered by their case-folded form (ties by the word
as written), joined by single spaces. It happens to the text, before tokenisation and truncation,
in the same way at training and at scoring time; queries are never sorted.

One helper (:func:`sort_words`) and one option declaration (:func:`sort_items_option`) serve
every ranker that supports the ablation; each reads its items through :func:`item_texts` in the
one place where its item texts are tokenised, so the option cannot apply at scoring and not at
training. ``bench ablate --what item-order`` runs a ranker with the option off and on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from rankers.base import SCORE, TRAINING, RankerConfig, option

#: the option's name: a ranker supports the ablation when its config declares it
OPTION = "sort_item_tokens"

HELP = (
    "order ablation: train and score on items whose whitespace words are sorted alphabetically "
    "(case-folded, each word with its WordPiece pieces kept whole), before tokenisation and "
    "truncation; queries as written"
)


def sort_words(text: str) -> str:
    """``text``'s whitespace words sorted by their case-folded form (ties: as written), joined by
    one space. The result depends only on the multiset of words (so sorting twice changes
    nothing, and any word order of the same words gives the same text), and no word is split,
    so the tokenizer sees the same words, only their order is gone."""
    return " ".join(sorted(text.split(), key=lambda w: (w.casefold(), w)))


def sort_items_option() -> Any:
    """The ``sort_item_tokens`` field for a ranker's config class, declared here once (role
    TRAINING and SCORE: a model trained on sorted items differs, and its scores mean sorted
    items, so a loaded checkpoint keeps its own value)."""
    return option(False, role=TRAINING | SCORE, help=HELP)


def supports(config: type[RankerConfig] | RankerConfig) -> bool:
    """Whether a config (class or instance) declares the option (``bench ablate`` refuses a
    ranker that does not, before any work)."""
    return any(f.name == OPTION for f in dataclasses.fields(config))


def item_texts(config: RankerConfig, texts: Sequence[str]) -> Sequence[str]:
    """The item texts a ranker tokenises: ``texts`` as given, or each one's words sorted when the
    config declares and sets the option."""
    if getattr(config, OPTION, False):
        return [sort_words(t) for t in texts]
    return texts
