"""The paper-style latency table (``bench latency-table``) and the profile table of
``bench latency --profile``, both rendered from latency records through the one table writer
(:mod:`bench.core.writer`).

The paper's table compares CROSS-JEM with a cross-encoder at each list size. Here one line is one
(encoder, precision, N) of the records given: monoBERT at its best batch size, CROSS-JEM in the
union layout (the paper's) and the sentence-transformers CrossEncoder peer, their p50 ms per
query, CROSS-JEM's speed-up over each (ratio of p50s), and from the profiled pass of each row
(``--profile``) the kernels launched and the device busy time per query. Records of several runs
(one per ``--arch``, say) make one table; where two records time the same line, the newer one
is shown. The device and the encoders' weights are named under the table, so a GPU table says
which GPU it ran on and that the paper's width ran random weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.writer import markdown, titled
from bench.latency.records import LatencyRecord, LatencyRow

#: the three rankers of the table, by the ``ranker`` name of their rows
MONOBERT, CROSSJEM, PEER = "monobert", "crossjem", "st-crossencoder"
#: the CROSS-JEM layout the table reports (the paper's: ``--set crossjem.order=union``)
UNION = "union"
#: monoBERT's scoring mode the table reports: items tokenised once in ``index()``, as CROSS-JEM's
PRE_TOKENISED = "pre-tokenised"
MISSING = "–"

HEADER = [
    "encoder",
    "precision",
    "N",
    "monoBERT p50 ms",
    "monoBERT batch",
    "CROSS-JEM union p50 ms",
    "peer p50 ms",
    "speed-up over monoBERT",
    "speed-up over peer",
    "kernels/query (monoBERT / CROSS-JEM / peer)",
    "busy ms/query (monoBERT / CROSS-JEM / peer)",
]


@dataclass
class PaperLine:
    """The three rankers' rows timed at one (encoder, precision, N); None: not in the records."""

    arch: str
    precision: str
    n: int
    rows: dict[str, LatencyRow | None]


@dataclass
class PaperTable:
    title: str
    lines: list[PaperLine]
    notes: list[str] = field(default_factory=list)


def _p50(row: LatencyRow | None) -> float | None:
    return None if row is None else float(row.latency["p50_ms"])


def _ratio(slow: LatencyRow | None, fast: LatencyRow | None) -> float | None:
    a, b = _p50(slow), _p50(fast)
    return a / b if a is not None and b else None


def _candidates(record: LatencyRecord, ranker: str, n: int, precision: str) -> list[LatencyRow]:
    """The rows of ``ranker`` at ``n`` in ``precision`` the table may show: monoBERT's and
    CROSS-JEM's pre-tokenised (items tokenised once in ``index()``), CROSS-JEM's in the union
    layout only (the other layouts and modes are other comparisons), the peer's all (it has one
    mode: predict's, tokenising in the call)."""
    rows = [
        r for r in record.rows if r.ranker == ranker and r.n == n and _precision(r) == precision
    ]
    if ranker in (MONOBERT, CROSSJEM):
        rows = [r for r in rows if r.mode == PRE_TOKENISED]
    if ranker == CROSSJEM:
        rows = [r for r in rows if r.options.get("order") == UNION]
    return rows


def _fastest(rows: Sequence[LatencyRow]) -> LatencyRow | None:
    """The row of least p50 (monoBERT's best batch size; the peer's)."""
    return min(rows, key=lambda r: float(r.latency["p50_ms"]), default=None)


def _precision(row: LatencyRow) -> str:
    """The row's precision: its ``--dtypes`` tag, else its ``dtype`` option."""
    return row.precision or str(row.options.get("dtype", row.dtype))


def device_name(record: LatencyRecord) -> str:
    """``NVIDIA H200 (cuda, torch 2.11.0+cu130, CUDA 13.0)``, or on a CPU ``cpu (1 threads,
    torch ...)``: what the record says of its device."""
    info = record.provenance.get("device", {})
    torch = f"torch {info['torch']}" if info.get("torch") else "torch ?"
    if info.get("gpu"):
        return f"{info['gpu']} ({record.device}, {torch}, CUDA {info.get('cuda')})"
    return f"{record.device} ({record.threads} threads, {torch})"


def build_paper_table(records: Sequence[LatencyRecord]) -> PaperTable:
    """One line per (encoder, precision, N) found in ``records`` (in the order the records and
    their precisions and N come; a later record's line replaces an earlier one's)."""
    if not records:
        raise ValueError("no latency records to tabulate")
    lines: dict[tuple[str, str, int], PaperLine] = {}
    for record in sorted(records, key=lambda r: r.created):
        arch = str(record.config.get("arch", "minilm-l6"))
        for block in record.blocks:
            precisions = dict.fromkeys(_precision(r) for r in record.rows if r.n == block.n)
            for precision in precisions:
                rows = {
                    ranker: _fastest(_candidates(record, ranker, block.n, precision))
                    for ranker in (MONOBERT, CROSSJEM, PEER)
                }
                if any(rows.values()):
                    lines[(arch, precision, block.n)] = PaperLine(arch, precision, block.n, rows)
    devices = sorted({device_name(r) for r in records})
    datasets = sorted({f"{r.dataset}/{r.split}" for r in records})
    weights = {
        f"{line.arch}: {row.weights}"
        for line in lines.values()
        for row in line.rows.values()
        if row is not None and row.ranker == MONOBERT
    }
    notes = [
        f"device: {'; '.join(devices)}",
        "p50 ms per query; speed-up: the other ranker's p50 over CROSS-JEM's (union layout); "
        "monoBERT (at its fastest batch size) and CROSS-JEM with items tokenised once in "
        "index(); peer: sentence-transformers' CrossEncoder.predict, tokenising in the call",
        "kernels and busy time per query: one profiled pass after the timing (--profile); "
        "on a CPU aten operators and their CPU time stand for kernels and device time",
        *(f"weights {w}" for w in sorted(weights)),
    ]
    ordered = sorted(lines.values(), key=lambda ln: (ln.arch, ln.precision, ln.n))
    title = f"Latency, CROSS-JEM against cross-encoders: {', '.join(datasets)}"
    return PaperTable(title=title, lines=ordered, notes=notes)


def _ms(value: float | None) -> str:
    return MISSING if value is None else f"{value:,.2f}"


def _times(value: float | None) -> str:
    return MISSING if value is None else f"{value:.2f}x"


def _per_query(rows: dict[str, LatencyRow | None], key: str, digits: int) -> str:
    """``a / b / c`` of the three rows' profile ``key`` (– where a row or its profile lacks)."""
    texts = []
    for ranker in (MONOBERT, CROSSJEM, PEER):
        row = rows[ranker]
        value = None if row is None or row.profile is None else row.profile.get(key)
        texts.append(MISSING if value is None else f"{float(value):,.{digits}f}")
    return " / ".join(texts)


def paper_rows(table: PaperTable) -> list[list[str]]:
    """The cell texts of :data:`HEADER`, one list per line of ``table``."""
    out = []
    for line in table.lines:
        mono, cj, peer = (line.rows[r] for r in (MONOBERT, CROSSJEM, PEER))
        batch = None if mono is None else mono.options.get("batch_size")
        out.append(
            [
                line.arch,
                line.precision,
                str(line.n),
                _ms(_p50(mono)),
                MISSING if batch is None else str(batch),
                _ms(_p50(cj)),
                _ms(_p50(peer)),
                _times(_ratio(mono, cj)),
                _times(_ratio(peer, cj)),
                _per_query(line.rows, "kernels_per_query", 0),
                _per_query(line.rows, "busy_ms_per_query", 2),
            ]
        )
    return out


def render_paper(table: PaperTable) -> str:
    """``table`` as markdown: its title, the grid, its notes."""
    return titled(table.title, markdown(HEADER, paper_rows(table), 3), table.notes)


# -- the profile of `bench latency --profile` ------------------------------------------------------
PROFILE_HEADER = ["N", "row", "unit", "kernels/query", "busy ms/query", "wall ms/query", "busy"]


def profile_rows(record: LatencyRecord) -> list[list[str]]:
    """One line per profiled row of ``record`` (empty without ``--profile``)."""
    out = []
    for row in record.rows:
        p = row.profile
        if p is None:
            continue
        out.append(
            [
                str(row.n),
                row.label,
                str(p["unit"]),
                f"{float(p['kernels_per_query']):,.0f}",
                f"{float(p['busy_ms_per_query']):,.2f}",
                f"{float(p['wall_ms_per_query']):,.2f}",
                f"{100 * float(p['busy_share']):.0f}%",
            ]
        )
    return out


def profile_title(record: LatencyRecord) -> str:
    return f"Profile (one pass after the timing): {device_name(record)}"


def read_latency_records(paths: Sequence[Path]) -> list[LatencyRecord]:
    """The latency records of ``paths``: files, or folders whose ``*.json`` are read (a
    dataset's folder under ``results/latency/``); ValueError naming a path that is neither or
    a file that is not a latency record."""
    import json

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise ValueError(f"{path}: no latency records (*.json) in this folder")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise ValueError(f"{path}: no such file or folder")
    records = []
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            records.append(LatencyRecord.from_json(data, file))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"{file}: not a latency record ({type(exc).__name__}: {exc})") from exc
    return records


def render_profile(record: LatencyRecord) -> str:
    """The profile table of ``record`` as markdown; empty when no row was profiled."""
    rows = profile_rows(record)
    return titled(profile_title(record), markdown(PROFILE_HEADER, rows, 3)) if rows else ""
