"""Seed groups: one configuration trained and scored under several seeds, read as one row.

A trained result is one draw of its training's randomness (initial head weights, dropout masks,
batch order); a difference between two rankers smaller than what a reseed moves says nothing.
A **seed group** is the runs of one configuration that differ only in the seed, each a result
record of its own under its own cache key (the member for seed ``k`` is exactly `bench run --set
seed=k`'s record: :mod:`bench.execution.seeding`), and a small group record that lists them:
``SPLIT-seeds-HASH.json`` beside the members (``results/runs/DATASET/RANKER/``), each member by
its path relative to the group file and the SHA-256 of its record file, so the group can be
assembled from records made at any time (``bench group make``) and copied with them (a
published table's records).

Readers show a group as one row (:func:`collapse_groups`, :class:`GroupRecord`): each metric's
mean and sample standard deviation over the seeds (:func:`spread`), and, for paired tests, the
per-query mean over the seeds. A group whose member record changed since it was written (a record
evaluated again, a record moved) is not used, and a warning names the member.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.core.io import atomic_write_json
from bench.results.labels import RowKey
from bench.results.records import (
    PER_QUERY,
    RECORD,
    PerQueryFile,
    ResultRecord,
    checked_per_query,
    config_hash,
    file_sha256,
    files_problem,
)

log = logging.getLogger(__name__)

#: ``kind`` of a group record file (a result record's is ``run``)
GROUP_KIND = "seed-group"
#: a group file's name: ``{split}-seeds-{digest}.json`` beside its members' folders
GROUP_INFIX = "-seeds-"
#: the run settings that may differ between members (everything else must be equal)
SEED_FIELD = "seed"


@dataclasses.dataclass(frozen=True)
class GroupMember:
    """One member of a group: its seed, its record file (relative to the group file's folder)
    and the SHA-256 of that file's bytes when the group was written."""

    seed: int
    record: str
    sha256: str


@dataclasses.dataclass
class SeedGroup:
    """The record of a seed group: what the members share and the members themselves."""

    dataset: str
    split: str
    ranker: str
    label: str
    members: list[GroupMember]
    created: str = ""
    #: the command that made the group (``bench run ... --seeds 0,1,2``), "" when assembled
    command: str = ""
    kind: str = GROUP_KIND
    path: Path | None = dataclasses.field(default=None, compare=False)

    @property
    def seeds(self) -> list[int]:
        return [m.seed for m in self.members]

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("path")
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path | None = None) -> SeedGroup:
        where = path or "a group record"
        if data.get("kind") != GROUP_KIND:
            raise ValueError(f"{where}: not a seed group record (kind {data.get('kind')!r})")
        try:
            members = [
                GroupMember(int(m["seed"]), str(m["record"]), str(m["sha256"]))
                for m in data["members"]
            ]
            return cls(
                dataset=str(data["dataset"]),
                split=str(data["split"]),
                ranker=str(data["ranker"]),
                label=str(data["label"]),
                members=members,
                created=str(data.get("created", "")),
                command=str(data.get("command", "")),
                path=path,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: not a valid seed group record ({exc!r})") from None

    def member_file(self, member: GroupMember) -> Path:
        """The member's record file (relative paths start at the group file's folder)."""
        base = self.path.parent if self.path is not None else Path()
        return base / member.record


def record_file(record: ResultRecord) -> Path:
    """The file a record was read from: ``record.json`` in a run folder, or the JSON file
    itself (a record kept under ``results/reference``)."""
    if record.path is None:
        raise ValueError(f"record of {record.label} on {record.dataset}/{record.split} has no path")
    return record.path / RECORD if record.path.is_dir() else record.path


def per_query_file(record_path: Path) -> Path:
    """The per-query file of a record file: ``perquery.tsv`` beside ``record.json``, else
    ``NAME.perquery.tsv`` beside ``NAME.json`` (how ``results/reference`` keeps them)."""
    if record_path.name == RECORD:
        return record_path.parent / PER_QUERY
    return record_path.with_suffix(".perquery.tsv")


def record_seed(record: ResultRecord) -> int:
    """The seed a record is a member for: its ranker's training seed (``config.seed``, what
    ``--set seed=K`` sets: the training draws its weights and order from it), else, for a
    ranker without one, the run's (``run_config.seed``)."""
    config, run = record.config or {}, record.run_config or {}
    seed = config[SEED_FIELD] if SEED_FIELD in config else run.get(SEED_FIELD)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"{record_file(record)}: no integer seed in config or run_config")
    return seed


def group_label(label: str) -> str:
    """A member's row label without its seed (``seed=1``: the training seed a run with
    ``--set seed=1`` names): the label the group's row shows, the same for every member."""
    try:
        key = RowKey.parse(label)
    except ValueError:
        return label
    options = tuple((k, v) for k, v in key.options if k != SEED_FIELD)
    return dataclasses.replace(key, options=options).label()


def _unseeded(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != SEED_FIELD}


def _differences(first: ResultRecord, other: ResultRecord) -> list[str]:
    """What makes ``other`` more than a reseed of ``first`` (empty: only the seed differs: the
    run's and the ranker's training seed, and so the label's ``seed=``)."""
    out = [
        name
        for name in ("dataset", "split", "ranker", "kind")
        if getattr(first, name) != getattr(other, name)
    ]
    if group_label(first.label) != group_label(other.label):
        out.append("label")
    if _unseeded(first.config) != _unseeded(other.config):
        names = set(first.config) | set(other.config)
        differ = sorted(k for k in names if first.config.get(k) != other.config.get(k))
        out.append("config " + ", ".join(differ))
    run_a, run_b = (_unseeded(r.run_config or {}) for r in (first, other))
    if run_a != run_b:
        keys = sorted(k for k in set(run_a) | set(run_b) if run_a.get(k) != run_b.get(k))
        out.append("run settings " + ", ".join(keys))
    parts_a, parts_b = first.key_parts or {}, other.key_parts or {}
    out += [f"key component {p}" for p in ("data", "code") if parts_a.get(p) != parts_b.get(p)]
    return out


def make_group(records: Sequence[ResultRecord], command: str = "") -> SeedGroup:
    """The group of ``records``, which must be runs of one configuration differing only in the
    seed (dataset, split, ranker, label, config, run settings, data and code keys equal, the
    seeds distinct); ordered by seed. At least two: one seed has no spread."""
    if len(records) < 2:
        raise ValueError(
            f"a seed group needs at least two records, got {len(records)} (one seed: --set seed=K)"
        )
    ordered = sorted(records, key=record_seed)
    first = ordered[0]
    seeds = [record_seed(r) for r in ordered]
    if len(set(seeds)) != len(seeds):
        repeated = sorted({s for s in seeds if seeds.count(s) > 1})
        raise ValueError(f"seed group: seed {repeated[0]} is given twice (each seed once)")
    for other in ordered[1:]:
        if diff := _differences(first, other):
            raise ValueError(
                f"{record_file(other)} is not a reseed of {record_file(first)}: they differ in "
                + ", ".join(diff)
            )
    created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    members = [
        GroupMember(seed, str(record_file(r)), file_sha256(record_file(r)))
        for seed, r in zip(seeds, ordered, strict=True)
    ]
    label = group_label(first.label)
    return SeedGroup(first.dataset, first.split, first.ranker, label, members, created, command)


def group_name(group: SeedGroup) -> str:
    """``{split}-seeds-{digest}.json``: one file per split and set of member records."""
    digest = config_hash({"members": [(m.seed, Path(m.record).as_posix()) for m in group.members]})
    return f"{group.split}{GROUP_INFIX}{digest}.json"


def write_group(group: SeedGroup, folder: Path | None = None) -> SeedGroup:
    """Write ``group`` into ``folder`` (default: the folder holding the first member's run
    folder, ``results/runs/DATASET/RANKER``) with its members' paths relative to it; returns
    the group as written (its ``path`` set)."""
    first = Path(group.members[0].record)
    if folder is None:
        folder = first.parent.parent if first.name == RECORD else first.parent
    members = [
        dataclasses.replace(m, record=Path(os.path.relpath(m.record, folder)).as_posix())
        for m in group.members
    ]
    out = dataclasses.replace(group, members=members, path=None)
    path = folder / group_name(out)
    atomic_write_json(path, out.to_json())
    return dataclasses.replace(out, path=path)


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (ValueError naming the file when it holds none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_group(path: Path) -> SeedGroup:
    """The group record at ``path`` (ValueError naming the file when it is not one)."""
    return SeedGroup.from_json(read_json_object(path), path)


def load_groups(
    root: Path, dataset: str | None = None, split: str | None = None
) -> list[SeedGroup]:
    """Every group record under ``root/runs`` (of ``dataset`` and ``split`` when given);
    unreadable ones are skipped with a warning."""
    pattern = f"{dataset or '*'}/*/{split or '*'}{GROUP_INFIX}*.json"
    groups = []
    for path in sorted((root / "runs").glob(pattern)):
        try:
            groups.append(read_group(path))
        except (OSError, ValueError) as exc:
            log.warning("skipping %s: %s", path, exc)
    return groups


def group_problem(group: SeedGroup) -> str | None:
    """Why ``group`` cannot be read now (None: every member record is there, unchanged)."""
    # absolute: a group read through a relative path names its members relative to the cwd
    files = {str(group.member_file(m).absolute()): m.sha256 for m in group.members}
    problem = files_problem(Path("/"), files)
    return None if problem is None else f"{problem} (a member of the seed group {group.path})"


# -- reading a group as one row ------------------------------------------------------------------
def spread(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1 in the denominator) of ``values`` (two or
    more: one value has no spread)."""
    if len(values) < 2:
        raise ValueError(f"a spread needs at least two values, got {len(values)}")
    return statistics.fmean(values), statistics.stdev(values)


def mean_per_query(
    members: Sequence[Mapping[str, Mapping[str, float]]],
) -> dict[str, dict[str, float]]:
    """The per-query mean over ``members`` (each qid -> metric -> value) of the queries and
    metrics every member has: what a paired test compares for a group."""
    if not members or not all(members):
        return {}
    qids = [q for q in members[0] if all(q in m for m in members[1:])]
    out: dict[str, dict[str, float]] = {}
    for qid in qids:
        names = [k for k in members[0][qid] if all(k in m[qid] for m in members[1:])]
        out[qid] = {k: statistics.fmean(m[qid][k] for m in members) for k in names}
    return out


def _mean_numbers(dicts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The first mapping with each number every mapping has replaced by the mean."""
    out = dict(dicts[0])
    for key, value in dicts[0].items():
        values = [d.get(key) for d in dicts]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            finite = [float(v) for v in values if v is not None and math.isfinite(v)]
            out[key] = statistics.fmean(finite) if len(finite) == len(values) else value
    return out


@dataclasses.dataclass
class GroupRecord(ResultRecord):
    """A seed group read as one result row: ``metrics`` the mean over the seeds, ``sd`` their
    sample standard deviation, :meth:`per_query` the per-query mean; the rest is the first
    member's (the members share it), but ``training.dev_baselines.below`` lists every
    no-training ranker some member's model scored below on dev."""

    members: list[ResultRecord] = dataclasses.field(default_factory=list)
    seeds: list[int] = dataclasses.field(default_factory=list)
    sd: dict[str, float] = dataclasses.field(default_factory=dict)
    #: per-query values of each member, in member order (empty mapping: no file kept)
    member_per_query: list[dict[str, dict[str, float]]] = dataclasses.field(default_factory=list)
    #: why a member's per-query file cannot be used (missing or edited), naming it
    member_problems: list[str] = dataclasses.field(default_factory=list)

    def read_per_query_file(self) -> PerQueryFile:
        """The per-query mean over the members; none when a member's file is missing or
        edited (:func:`member_per_query`): a mean over the other seeds would be another row."""
        path = self.path or Path()
        if self.member_problems:
            return PerQueryFile(path, {}, "; ".join(self.member_problems))
        return PerQueryFile(path, mean_per_query(self.member_per_query))

    def metric_values(self, metric: str) -> list[float]:
        """The members' values of ``metric``, in seed order."""
        return [float(m.metrics[metric]) for m in self.members]

    @classmethod
    def of(cls, group: SeedGroup, records: Sequence[ResultRecord]) -> GroupRecord:
        """The row of ``group`` whose member records are ``records`` (in member order)."""
        first = records[0]
        names = [k for k in first.metrics if all(k in r.metrics for r in records[1:])]
        stats = {k: spread([float(r.metrics[k]) for r in records]) for k in names}
        training = dict(first.training) if first.training else None
        below = sorted(
            {
                b
                for r in records
                for b in ((r.training or {}).get("dev_baselines") or {}).get("below") or []
            }
        )
        if training is not None and below:
            training["dev_baselines"] = {**(training.get("dev_baselines") or {}), "below": below}
        fields = {f.name: getattr(first, f.name) for f in dataclasses.fields(ResultRecord)}
        fields.update(
            label=group_label(first.label),
            metrics={k: mean for k, (mean, _) in stats.items()},
            latency=_mean_numbers([r.latency or {} for r in records]),
            training=training,
            created=max(r.created for r in records),
            config_hash=group_name(group).removesuffix(".json"),
            path=group.path,
        )
        read = [
            member_per_query(group.member_file(m), r)
            for m, r in zip(group.members, records, strict=True)
        ]
        return cls(
            **fields,
            members=list(records),
            seeds=group.seeds,
            sd={k: sd for k, (_, sd) in stats.items()},
            member_per_query=[r.values for r in read],
            member_problems=[r.problem for r in read if r.problem is not None],
        )


def member_per_query(path: Path, record: ResultRecord) -> PerQueryFile:
    """The per-query values kept beside the record file ``path``, read by
    :func:`bench.results.records.checked_per_query` against the SHA-256 ``record`` lists: a
    file missing or edited is a problem naming it, never a silent mean."""
    return checked_per_query(per_query_file(path), (record.files or {}).get(PER_QUERY), path)


def read_member(path: Path) -> ResultRecord:
    """A member's record from its file (``record.json`` of a run folder: the record's path is
    the folder, as :func:`bench.results.records.read_record` gives it)."""
    return ResultRecord.from_json(
        read_json_object(path), path.parent if path.name == RECORD else path
    )


def group_record(group: SeedGroup) -> GroupRecord:
    """``group`` read from its member files (ValueError when one is missing or changed)."""
    if problem := group_problem(group):
        raise ValueError(problem)
    return GroupRecord.of(group, [read_member(group.member_file(m)) for m in group.members])


def collapse_groups(
    records: Sequence[ResultRecord], groups: Sequence[SeedGroup]
) -> list[ResultRecord]:
    """``records`` with the members of each usable group replaced by its :class:`GroupRecord`.

    A group is used when every member is among ``records`` (the current ones: a reader passes
    what it would show) and unchanged; of groups sharing a member, the one with more members,
    then the newest. Any other record of a group's row (ranker and label: another seed run
    alone) is left out, so a row is either the group's or one run's, never both."""
    by_file = {record_file(r).resolve(): r for r in records if r.path is not None}
    used: set[Path] = set()
    rows: list[ResultRecord] = []
    for group in sorted(groups, key=lambda g: (len(g.members), g.created), reverse=True):
        files = [group.member_file(m).resolve() for m in group.members]
        if any(f not in by_file for f in files) or used & set(files):
            continue
        if problem := group_problem(group):
            log.warning("seed group not shown: %s", problem)
            continue
        rows.append(GroupRecord.of(group, [by_file[f] for f in files]))
        used.update(files)
    shown = {(r.ranker, r.label) for r in rows}
    rest = [r for r in records if r.path is None or record_file(r).resolve() not in used]
    alone = [r for r in rest if (r.ranker, group_label(r.label)) in shown]
    if alone:
        log.info(
            "%d record(s) of a row shown as a seed group left out (other seeds run alone)",
            len(alone),
        )
    return rows + [r for r in rest if (r.ranker, group_label(r.label)) not in shown]


def choose_by_mean(scores: Sequence[Sequence[float]]) -> int:
    """The index of the candidate with the best mean score over its seeds (each entry: one
    candidate's dev scores, one per seed); the first on ties, as a one-seed choice."""
    if not scores or any(not s for s in scores):
        raise ValueError("nothing to choose from: every candidate needs a dev score")
    means = [statistics.fmean(s) for s in scores]
    return max(range(len(means)), key=lambda i: (means[i], -i))
