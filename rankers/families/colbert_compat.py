"""colbert-ai 0.2.22 on transformers 5: the one thing transformers 5 removed that colbert-ai needs.

colbert-ai builds its model class ``HF_ColBERT`` in ``hf_colbert.class_factory`` and ends its
``__init__`` with ``self.init_weights()``, the transformers 4 way. Transformers 5 requires every
model to end ``__init__`` with ``self.post_init()``, which records the static properties that
``from_pretrained`` reads afterwards (``all_tied_weights_keys`` first: without it loading fails
with ``'HF_ColBERT' object has no attribute 'all_tied_weights_keys'``).

:func:`install` wraps ``class_factory`` (where colbert-ai defined it and in the three modules that
imported it by name) so the class it returns ends its ``__init__`` with ``post_init()``. On
transformers 4 nothing is wrapped: ``post_init`` there would initialise the weights a second time
and move the random stream the new projection is drawn from. The wrapper is idempotent and keeps
colbert-ai's class name, ``from_pretrained`` and tokenizer helpers (it only subclasses).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, cast

log = logging.getLogger(__name__)

#: the colbert-ai modules that hold ``class_factory`` under that name
FACTORY_MODULES = (
    "colbert.modeling.hf_colbert",
    "colbert.modeling.base_colbert",
    "colbert.modeling.tokenization.query_tokenization",
    "colbert.modeling.tokenization.doc_tokenization",
)


def needs_post_init(transformers_version: str) -> bool:
    """Whether this transformers release requires ``post_init()`` at the end of a model's
    ``__init__`` (5.0 and later)."""
    major = transformers_version.split(".", 1)[0]
    return major.isdigit() and int(major) >= 5


def with_post_init(factory: Callable[[str], type]) -> Callable[[str], type]:
    """``factory`` whose classes call ``post_init()`` once their own ``__init__`` has run."""
    if getattr(factory, "_bench_post_init", False):
        return factory

    @functools.wraps(factory)
    def wrapped(name_or_path: str) -> type:
        base = factory(name_or_path)
        base_init = cast(Any, base).__init__

        def __init__(self: Any, config: Any, colbert_config: Any) -> None:
            base_init(self, config, colbert_config)
            self.post_init()

        return type(base.__name__, (base,), {"__init__": __init__, "__module__": base.__module__})

    wrapped._bench_post_init = True  # type: ignore[attr-defined]
    return wrapped


def install() -> bool:
    """Wrap colbert-ai's ``class_factory`` where transformers needs it; True when it did."""
    import importlib

    import transformers

    if not needs_post_init(transformers.__version__):
        return False
    for name in FACTORY_MODULES:
        module = importlib.import_module(name)
        module.class_factory = with_post_init(module.class_factory)  # type: ignore[attr-defined]
    log.debug("colbert-ai: class_factory wrapped for transformers %s", transformers.__version__)
    return True
