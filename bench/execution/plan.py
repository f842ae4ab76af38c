"""A command as a plan of jobs, then one loop that runs them.

A command (`bench run`, `train`, `demo`, `ablate`, `sweep`) first builds its :class:`Plan`
(:mod:`bench.execution.runner`): every job it needs - train teacher members, compare with the dev
baselines, train the model, score the split, evaluate - with its dependencies, its cache entry
and key, and its values resolved (a student's config names its teachers' model folders from the
start; no config changes while the plan runs). Whether each entry is cached, and if not why
(what changed since the closest entry, :func:`bench.results.cache.explain_miss`), is known before
any work: ``--plan`` prints exactly that (:meth:`Plan.rows`) and stops.

:class:`Executor` then runs, in dependency order, each job some target needs: a job whose
dependents are all cached is not needed (a cached run needs no model; a cached model needs
neither its teachers nor its dev baselines). A job checks its entry again under the entry's
lock (:func:`bench.results.cache.entry_lock`) and reuses it when whole, so two identical commands
share the work. A job reads its inputs through the executor (``inputs(job_id)``); an input left out
because its dependent looked cached is run then, should the entry have gone in between (and an
``on_demand`` job, a dev baseline, runs only when asked for). Jobs
never call back into :mod:`bench.execution.runner`. A scoring job is one :class:`Job` with a ``run``
callable, which is where a sharded scorer plugs in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: job kinds, in the order a plan table lists them within one target
TEACHER, BASELINE, TRAIN, SCORE, EVALUATE = "teacher", "dev baseline", "train", "score", "evaluate"
CACHED, TO_COMPUTE, NOT_NEEDED = "cached", "to compute", "not needed"

#: how a job reads its inputs: the result of the job with that id
Inputs = Callable[[str], Any]


@dataclass
class Job:
    """One unit of cached work. ``id``: its cache entry (unique in a plan); ``key``: the entry's
    key digest; ``cached``: whether the entry holds a finished result now (``why`` says what
    changed when it does not); ``run(inputs)`` computes it (or reuses the entry); ``optional``:
    a failure is logged and its result is None (a dev baseline that cannot run)."""

    id: str
    kind: str
    what: str
    key: str
    run: Callable[[Inputs], Any]
    deps: tuple[str, ...] = ()
    cached: bool = False
    why: str = ""
    optional: bool = False
    entry: Path | None = None
    #: the job reads its inputs even when its own result is current (evaluating a cached run
    #: reads the run's record), so its dependencies are needed whenever it is
    reads_inputs: bool = False
    #: run only when a dependent asks for it (a dev baseline: only once a training has a kept
    #: epoch to compare, and only in the main process of a multi-process training)
    on_demand: bool = False
    #: the job cannot run across a launch's processes (a trainer without distributed support):
    #: a multi-process command runs it in one process first, or refuses under a launcher
    single_process: bool = False


@dataclass
class Plan:
    """Jobs by id in dependency order (a job is added after its dependencies), and the targets
    whose results the command returns."""

    jobs: dict[str, Job] = field(default_factory=dict)
    targets: list[str] = field(default_factory=list)
    #: folders the jobs write into, with what they hold and what to do when one is not
    #: writable: checked (and created) when the plan is executed, before its first job, so
    #: planning (``--plan``, a command that fails on its options or data) writes nothing
    folders: dict[Path, tuple[str, str]] = field(default_factory=dict)
    #: what the plan says beside its jobs (the largest training step and its memory)
    notes: list[str] = field(default_factory=list)
    #: why the plan must not run (a training step that cannot fit): the executor stops before
    #: the first job with the first of them; ``--plan`` prints them
    refusals: list[str] = field(default_factory=list)

    def writes_into(self, folder: Path, what: str, hint: str) -> None:
        """Declare that some job writes into ``folder`` (``what`` it holds, ``hint``: what to do
        when it cannot be written)."""
        self.folders.setdefault(folder, (what, hint))

    def folder_problems(self) -> list[str]:
        """Why a declared folder could not be written, checked without creating anything."""
        from bench.core.io import writable_problem

        problems = (writable_problem(f, what, hint) for f, (what, hint) in self.folders.items())
        return [*self.refusals, *(p for p in problems if p)]

    def add(self, job: Job) -> str:
        """Add ``job`` (a job already planned, e.g. a teacher shared by two students, is kept
        once); returns its id."""
        missing = [d for d in job.deps if d not in self.jobs]
        if missing:
            raise ValueError(f"job {job.id} depends on jobs not yet planned: {missing}")
        self.jobs.setdefault(job.id, job)
        return job.id

    def target(self, job_id: str) -> str:
        self.targets.append(job_id)
        return job_id

    def needed(self) -> set[str]:
        """The jobs some target needs: the targets, and the dependencies of a needed job that
        is not cached."""
        needed: set[str] = set()
        todo = list(self.targets)
        while todo:
            job = self.jobs[todo.pop()]
            if job.id in needed:
                continue
            needed.add(job.id)
            if not job.cached or job.reads_inputs:
                todo.extend(job.deps)
        return needed

    def status(self, job: Job, needed: set[str]) -> str:
        if job.cached:
            return CACHED
        return TO_COMPUTE if job.id in needed else NOT_NEEDED

    def rows(self) -> list[dict[str, str]]:
        """One row per job for ``--plan``: kind, what, key, status and why."""
        needed = self.needed()
        rows = []
        for job in self.jobs.values():
            status = self.status(job, needed)
            why = job.why if status == TO_COMPUTE else ""
            if status == NOT_NEEDED:
                why = "what needs it is cached; " + job.why
            rows.append(
                {"job": job.kind, "what": job.what, "key": job.key, "status": status, "why": why}
            )
        return rows

    def __iter__(self) -> Iterator[Job]:
        return iter(self.jobs.values())


class Executor:
    """Runs a plan's needed jobs in dependency order; ``before_job`` runs before each (the
    command's seeding, so a job's result does not depend on which jobs ran before it)."""

    def __init__(self, plan: Plan, before_job: Callable[[], None] | None = None) -> None:
        self.plan = plan
        self.before_job = before_job or (lambda: None)
        self.results: dict[str, Any] = {}

    def result(self, job_id: str) -> Any:
        """The result of job ``job_id``, running it now if it has not run."""
        if job_id not in self.results:
            job = self.plan.jobs[job_id]
            self.before_job()
            if job.optional:
                try:
                    self.results[job_id] = job.run(self.result)
                except (OSError, ValueError, RuntimeError) as exc:
                    log.warning("%s: %s could not run (%s)", job.kind, job.what, exc)
                    self.results[job_id] = None
            else:
                self.results[job_id] = job.run(self.result)
        return self.results[job_id]

    def execute(self) -> list[Any]:
        """Run every needed job in order; the targets' results, in target order."""
        from bench.core.io import ensure_writable

        needed = self.plan.needed()
        if self.plan.refusals:
            raise ValueError(self.plan.refusals[0])
        for folder, (what, hint) in self.plan.folders.items():
            ensure_writable(folder, what, hint)
        for job in self.plan:
            if job.id in needed and not job.on_demand:
                self.result(job.id)
        return [self.result(t) for t in self.plan.targets]
