"""Which code each job's cache key covers: the key rule, in one place.

A cached result is reused only when the code that made it is the same, and only that code:
editing the CLI, a table or a plot, or another ranker, recomputes nothing. Each job names the
modules it runs; :func:`bench.core.provenance.code_fingerprint` hashes their import closure (from
the source, :class:`~bench.core.provenance.CodeScope`), the ranker's settings file and the versions
of the packages that compute scores or train weights.

* **score** (a run file and its latency): the ranker's module and :mod:`bench.execution.scoring`,
  less the measures (:data:`EVALUATION_MODULES`) and what only training runs (the package
  :data:`TRAINING_ONLY_PACKAGE`, imports marked ``# key: training``). A fine-tuned ranker's key
  also holds the trained model's key (its ``model`` component), so training code counts through it.
* **train** (a model folder): the ranker's module, with imports marked training-only, and
  :mod:`bench.execution.fitting`, measures included (dev selects the epoch); a student's key holds
  its teachers' keys (the ``teacher`` component).
* **evaluate** (the metrics of a stored run): :data:`EVALUATION_MODULES` and the measures asked
  for. A record whose evaluation stamp differs is evaluated again from its run file, never
  re-scored.

:mod:`bench.execution.selection` asks the same functions whether a record is current.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core.provenance import CodeScope, code_fingerprint
from bench.results.cache import component_hash

if TYPE_CHECKING:
    from rankers.base import Ranker

#: what turns a stored run into metrics: left out of a scoring key, the whole evaluation key
EVALUATION_MODULES: tuple[str, ...] = ("bench.results.metrics",)
#: the package of what rankers run only inside ``fit`` (the training loop, list training, teacher
#: targets, resume): one prefix, so a new training module needs no entry here. Left out of a
#: scoring key; a fine-tuned ranker's score key holds its model's key, which covers it
#: (tests/test_keys.py checks that no ranker imports it at module level)
TRAINING_ONLY_PACKAGE = "rankers.fit"


def training_only(module: str) -> bool:
    """Whether ``module`` runs only in training (it is :data:`TRAINING_ONLY_PACKAGE` or in it)."""
    return module == TRAINING_ONLY_PACKAGE or module.startswith(TRAINING_ONLY_PACKAGE + ".")


#: the modules a scoring job runs besides its ranker's
SCORING_MODULES: tuple[str, ...] = ("bench.execution.scoring",)
#: the modules a training job runs besides its ranker's
TRAINING_MODULES: tuple[str, ...] = ("bench.execution.fitting",)


def scoring_code(module: str, settings: Path) -> dict[str, Any]:
    """The code fingerprint of scoring with the ranker defined in ``module`` (settings file
    ``settings``)."""
    scope = CodeScope(
        roots=(module, *SCORING_MODULES),
        files=(settings,),
        leave_out=(*EVALUATION_MODULES, TRAINING_ONLY_PACKAGE),
    )
    return code_fingerprint(scope)


def training_code(module: str, settings: Path) -> dict[str, Any]:
    """The code fingerprint of training the ranker defined in ``module`` (settings file
    ``settings``)."""
    scope = CodeScope(roots=(module, *TRAINING_MODULES), files=(settings,), training=True)
    return code_fingerprint(scope)


def evaluation_stamp(measures: Sequence[str]) -> dict[str, Any]:
    """What a record's metrics were computed with: the measures and the hash of the code that
    computes them (:data:`EVALUATION_MODULES`); a record with another stamp is evaluated again
    from its run file."""
    code = code_fingerprint(CodeScope(roots=EVALUATION_MODULES))
    return {"measures": list(measures), "code": component_hash("code", code)}


def autocast_part(ranker: Ranker) -> dict[str, str]:
    """The training key's autocast component: empty where training runs float32 (CPU, or
    ``train_dtype`` float32), else ``{"autocast": "bf16"}`` (or fp16)."""
    train_dtype = getattr(ranker.config, "train_dtype", None)
    if train_dtype is None:
        return {}
    from rankers.fit.optim import mixed_precision

    chosen = mixed_precision(ranker.device, str(train_dtype))
    return {} if chosen == "no" else {"autocast": chosen}
