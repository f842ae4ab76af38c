"""`bench run --processes N` end to end: the run file and metrics do not
depend on the process count, one cache entry serves any count, a shard may be empty, and a
failed rank ends the run with one line naming it and nothing cached.

The commands run as real processes (the spawned ranks need their own interpreters); every run
has one thread per process, so the 1- and 2-process runs make the same per-process computation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from commands import BENCH, PROJECT_ROOT, at_once, bench_env, ok, run_command
from conftest import BM25_RUN, TINY_MONOBERT_TRAIN

pytestmark = pytest.mark.processes


def bench_run(
    root: Path, data: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "bench.cli.main", "run", "-d", "wikiqa", "--threads", "1"]
    return run_command(root, data, [*command, *args], env, timeout=180)


#: :data:`conftest.BM25_RUN`'s options, for :func:`bench_run`
BM25_12 = ("-r", "bm25", "--subset", "12")
assert set(BM25_12) | {"run", "-d", "wikiqa", "--threads", "1"} == set(BM25_RUN)


def entry(root: Path) -> Path:
    (record,) = root.glob("runs/*/*/*/record.json")
    return record.parent


def one_and_two_processes(
    ranker: str, data: Path, root: Path, tiny_bert: Path, bm25_run_root: Path
) -> tuple[Path, Path, tuple[str, ...]]:
    """The 1- and the 2-process run of ``ranker`` on 12 queries, each in its own results folder
    under ``root`` (dpr on the tiny BERT: what is checked is where the work runs, not what the
    model knows); checks they are one entry. Returns both folders and the run's options."""
    args: tuple[str, ...] = ("-r", ranker, "--subset", "12")
    args += ("--model", str(tiny_bert)) if ranker == "dpr" else ()
    one, two = root / "one", root / "two"
    if ranker == "bm25":  # the session's one-process run (conftest.BM25_RUN), written here
        shutil.copytree(bm25_run_root, one)
        ok(bench_run(two, data, *args, "--processes", "2"))
    else:  # the one- and the two-process run at once, each in its own folder
        for result in at_once(
            lambda: bench_run(one, data, *args),
            lambda: bench_run(two, data, *args, "--processes", "2"),
        ):
            ok(result)
    a, b = entry(one), entry(two)
    assert a.name == b.name  # the same key, whatever the process count
    assert (a / "run.trec").read_bytes() == (b / "run.trec").read_bytes()
    record_a = json.loads((a / "record.json").read_text())
    record_b = json.loads((b / "record.json").read_text())
    assert record_a["metrics"] == record_b["metrics"]
    assert (record_a["provenance"]["processes"], record_b["provenance"]["processes"]) == (1, 2)
    assert record_b["latency"]["queries"] == 12  # both ranks' calls pooled
    return one, two, args


def test_two_processes_give_the_one_process_run_of_a_neural_ranker(
    shared_data: Path, tmp_path: Path, tiny_bert: Path, bm25_run_root: Path
) -> None:
    """dpr's model step in each rank, its scores gathered: the 1-process run file and metrics."""
    one_and_two_processes("dpr", shared_data, tmp_path, tiny_bert, bm25_run_root)


def test_either_process_count_reuses_the_others_entry_and_force_computes_it_once(
    shared_data: Path, tmp_path: Path, tiny_bert: Path, bm25_run_root: Path
) -> None:
    """bm25's 2-process run gives the 1-process run (the session's, conftest.BM25_RUN); then,
    as for any ranker (whether an entry is reused does not depend on it; bm25's processes
    start fastest): a 2-process run reuses the 1-process entry and the reverse, and ``--force``
    with 2 processes computes the entry once."""
    one, two, args = one_and_two_processes("bm25", shared_data, tmp_path, tiny_bert, bm25_run_root)
    for result in at_once(
        lambda: bench_run(one, shared_data, *args, "--processes", "2"),
        lambda: bench_run(two, shared_data, *args),
    ):
        assert "reusing" in ok(result).stderr
    # --force: the processes compute the entry once; the report then reads it (not a second,
    # one-process computation that would overwrite theirs)
    forced = ok(bench_run(one, shared_data, *args, "--processes", "2", "--force"))
    assert forced.stderr.count("wrote ") == 1
    assert "--force to recompute" not in forced.stderr  # it was recomputed, not reused
    assert "which the 2 processes computed or reused above" in " ".join(forced.stderr.split())
    assert json.loads((entry(one) / "record.json").read_text())["provenance"]["processes"] == 2


def test_more_processes_than_queries(shared_data: Path, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for result in at_once(
        lambda: bench_run(one, shared_data, "-r", "bm25", "--subset", "1"),
        lambda: bench_run(two, shared_data, "-r", "bm25", "--subset", "1", "--processes", "2"),
    ):
        ok(result)
    assert (entry(one) / "run.trec").read_bytes() == (entry(two) / "run.trec").read_bytes()
    # two processes did run (one with no query), not one
    assert json.loads((entry(two) / "record.json").read_text())["provenance"]["processes"] == 2


def test_a_failed_rank_is_named_and_nothing_is_cached(shared_data: Path, tmp_path: Path) -> None:
    result = bench_run(
        tmp_path,
        shared_data,
        *("-r", "bm25", "--subset", "4", "--processes", "2"),
        env={"BENCH_TEST_FAIL_RANK": "1"},
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: rank 1 of 2 failed while scoring: RuntimeError: injected failure "
        "(BENCH_TEST_FAIL_RANK=1)"
    ]
    assert not list(tmp_path.glob("runs/*/*/*/record.json"))
    assert not list(tmp_path.glob("runs/*/*/*/run.trec"))


def live_processes_with(marker: str) -> list[int]:
    """The pids of live processes whose environment holds ``marker`` (this user's)."""
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker.encode() in environ.read_bytes():
                pids.append(int(environ.parent.name))
        except OSError:  # gone meanwhile, or not ours
            continue
    return pids


def test_a_killed_rank_is_named_nothing_is_cached_and_a_rerun_completes(
    shared_data: Path, tmp_path: Path, bm25_run_root: Path
) -> None:
    """Rank 1 dies by SIGKILL after scoring one query (no Python cleanup, as the out-of-memory
    killer would end it): the command ends non-zero with one line naming the rank and the
    signal, no process is left, nothing is cached (no run entry, no temporary file, the lock
    free), and a rerun without the hook writes the one-process run file."""
    import fcntl

    args, one, root = BM25_12, bm25_run_root, tmp_path / "two"
    result = bench_run(
        root, shared_data, *args, "--processes", "2", env={"BENCH_TEST_KILL_RANK": "1"}
    )
    assert result.returncode == 1, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: rank 1 of 2 was ended by SIGKILL (from outside, e.g. out of memory); the other "
        "ranks were stopped, its work not written"
    ]
    assert live_processes_with(f"BENCH_RESULTS_DIR={root}\0") == []
    assert not list(root.glob("runs/*/*/*/record.json"))
    assert not list(root.glob("runs/*/*/*/run.trec"))
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")]
    (lock,) = root.glob("runs/wikiqa/bm25/*.lock")
    with lock.open() as handle:  # nobody holds it (the kernel released the dead ranks' locks)
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    ok(bench_run(root, shared_data, *args, "--processes", "2"))
    assert (entry(root) / "run.trec").read_bytes() == (entry(one) / "run.trec").read_bytes()
    record = json.loads((entry(root) / "record.json").read_text())
    assert record["provenance"]["processes"] == 2


def test_a_fine_tuned_model_in_the_cache_is_scored_by_shards(
    shared_data: Path, tmp_path: Path, tiny_bert: Path, tiny_monobert_root: Path
) -> None:
    """Training is not sharded, but a model the cache holds is: monoBERT trained by a 1-process
    run, scored by 1 process and by 2 (each from a copy of that cache: the model, no run entry),
    gives the same run file; a cached training job is no reason to refuse --processes. (On the
    tiny BERT: what is checked is where the work runs, not what the model learns; the session
    trained it, conftest.TINY_MONOBERT_TRAIN.)"""
    args = ("-r", "monobert", "--model", str(tiny_bert), "--subset", "6", "--train-subset", "8")
    args += ("--set", "epochs=1", "--set", "min_steps=0")
    # the two runs at once
    roots = [tmp_path / "results", tmp_path / "again"]
    for root in roots:
        shutil.copytree(tiny_monobert_root, root)
    alone, result = at_once(
        lambda: bench_run(roots[0], shared_data, *args),
        lambda: bench_run(roots[1], shared_data, *args, "--processes", "2"),
    )
    assert "training monobert" not in ok(alone).stderr
    (first,) = (roots[0] / "runs" / "wikiqa" / "monobert").glob("*/run.trec")
    one = first.read_bytes()
    assert "training monobert" not in ok(result).stderr
    (again,) = (roots[1] / "runs" / "wikiqa" / "monobert").glob("*/run.trec")
    assert again.read_bytes() == one
    record = json.loads((again.parent / "record.json").read_text())
    assert record["provenance"]["processes"] == 2


#: torchrun with 2 local processes (a free port of its own)
TORCHRUN = (
    str(Path(sys.executable).with_name("torchrun")),
    "--standalone",
    "--nproc_per_node",
    "2",
)


def bench_launch(
    root: Path,
    data: Path,
    *args: str,
    timeout: int = 300,
    launcher: tuple[str, ...] = TORCHRUN,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``LAUNCHER -m bench.cli ARGS`` (a launcher's ranks; torchrun with 2 processes unless
    told)."""
    return run_command(root, data, [*launcher, "-m", "bench.cli", *args], env, timeout)


def test_a_launch_trains_data_parallel_under_its_own_key(
    shared_data: Path, tmp_path: Path, tiny_bert: Path, tiny_monobert_root: Path
) -> None:
    """Under torchrun a list trainer trains on both ranks (each a slice of every batch), with
    the dev lists scored in shards: the dev score before training is the one-process value
    exactly (same weights, same lists), while the model is another one (each rank draws its own
    dropout masks), so it is cached under its own key beside the one-process model. (On the tiny
    BERT: what is checked is where the work runs, not what the model learns. The one-process
    model is the session's, conftest.TINY_MONOBERT_TRAIN.)"""
    root = tmp_path / "results"
    shutil.copytree(tiny_monobert_root, root)
    ok(bench_launch(root, shared_data, *TINY_MONOBERT_TRAIN, "--model", str(tiny_bert)))
    summaries = [
        json.loads(path.read_text()) for path in root.glob("models/wikiqa/monobert/*/training.json")
    ]
    by_processes = {s["processes"]: s for s in summaries}
    assert sorted(by_processes) == [1, 2]  # two entries: the launch did not take the 1-process key
    assert by_processes[1]["key"] != by_processes[2]["key"]
    assert by_processes[2]["dev_AP@10_before"] == by_processes[1]["dev_AP@10_before"]


def test_a_launch_refuses_a_trainer_without_distributed_training(
    shared_data: Path, tmp_path: Path
) -> None:
    result = bench_launch(
        tmp_path, shared_data, "run", "-r", "dpr", "-d", "wikiqa", "--fit", "--subset", "2"
    )
    # torchrun itself ends with 1 (and its own report) when a rank exits non-zero
    assert result.returncode != 0
    said = " ".join(result.stderr.split())
    assert "error: dpr on wikiqa/train: trains in one process only" in said, said[-2000:]
    assert "use --processes, which trains it before the processes start" in said
    assert said.count("trains in one process only") == 1  # the main rank says it, once
    assert not list(tmp_path.glob("models/*/*/*/manifest.json"))


def test_a_sweep_with_processes_trains_in_one_process_and_prints_the_one_process_sweep(
    shared_data: Path, tmp_path: Path, tiny_bert: Path
) -> None:
    """`bench sweep --processes 2` (run, demo and ablate take the same path,
    bench.execution.scale.execute_runs): its model is trained first in this one process (the
    one-process model, under the one-process key), its dev and test runs are scored in shards, and
    the sweep it prints and records is the one-process sweep. semeval16b: the sweep scores whole
    dev and test splits, and these are its smallest (41 and 59 queries)."""

    def sweep(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        command = [*BENCH, "sweep", "-r", "dpr", "-d", "semeval16b"]
        command += ["--set", "lr=1e-5", "--set", "epochs=1", "--train-subset", "8"]
        command += ["--set", f"model={tiny_bert}"]  # where the work runs, not what is learnt
        command += ["--threads", "1", "--no-write", *extra]
        return run_command(root, shared_data, command, timeout=400)

    one, two = tmp_path / "one", tmp_path / "two"
    alone, result = at_once(lambda: sweep(one), lambda: sweep(two, "--processes", "2"))
    table_one = ok(alone).stdout
    ok(result)
    assert "training in this process before the processes start: dpr" in result.stderr
    # the sweep table without the training seconds column (wall time differs)
    assert [line.rsplit(None, 1)[0] for line in result.stdout.splitlines()[:2]] == [
        line.rsplit(None, 1)[0] for line in table_one.splitlines()[:2]
    ]
    (model_one,) = one.glob("models/semeval16b/dpr/*/training.json")
    (model_two,) = two.glob("models/semeval16b/dpr/*/training.json")
    assert model_one.parent.name == model_two.parent.name  # the same training key
    trained = json.loads(model_two.read_text())
    assert trained["processes"] == 1
    assert trained["weights_hash"] == json.loads(model_one.read_text())["weights_hash"]
    runs_one = sorted(one.glob("runs/semeval16b/dpr/*/run.trec"))
    runs_two = sorted(two.glob("runs/semeval16b/dpr/*/run.trec"))
    assert [p.parent.name for p in runs_one] == [p.parent.name for p in runs_two]
    assert len(runs_two) == 2  # dev and test of the setting
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(runs_one, runs_two, strict=True))
    records = [json.loads((p.parent / "record.json").read_text()) for p in runs_two]
    assert {r["provenance"]["processes"] for r in records} >= {2}


def test_a_rank_killed_under_torchrun_leaves_nothing_and_a_rerun_completes(
    shared_data: Path, tmp_path: Path
) -> None:
    """Under torchrun the launcher names the killed rank itself (its "Root Cause" report); the
    survivor either says it lost a process (one line) or is stopped by the launcher first."""
    args = ("run", "-r", "bm25", "-d", "wikiqa", "--subset", "12", "--threads", "1")
    killed = bench_launch(tmp_path, shared_data, *args, env={"BENCH_TEST_KILL_RANK": "1"})
    assert killed.returncode != 0
    assert "SIGKILL" in killed.stderr
    assert "[rank0]: Traceback" not in killed.stderr  # the survivor has no traceback to show
    assert not list(tmp_path.glob("runs/*/*/*/record.json"))
    ok(bench_launch(tmp_path, shared_data, *args))
    assert list(tmp_path.glob("runs/*/*/*/run.trec"))


@pytest.mark.parametrize("ranker", ["crossjem"])  # monoBERT: the fine-tuned model test above
def test_a_checkpoint_scored_by_two_processes_gives_the_one_process_run(
    ranker: str, shared_data: Path, tmp_path: Path, tiny_bert: Path
) -> None:
    """A saved model (``--set checkpoint=DIR``: here the tiny BERT with its head as seeded,
    saved by the ranker itself, so no training is needed; what is checked is where the work
    runs, not what the model scores) scored by 2 processes gives the 1-process run file byte for
    byte, and a 2-process run reuses the 1-process entry."""
    import torch

    from rankers import create_ranker

    torch.manual_seed(0)
    model = create_ranker(ranker, {"model": str(tiny_bert)})
    model.module  # noqa: B018 - loads the encoder and builds the head
    folder = tmp_path / "checkpoint"
    model.save(folder)
    args = ("-r", ranker, "--subset", "12", "--set", f"checkpoint={folder}")
    one, two = tmp_path / "one", tmp_path / "two"
    for result in at_once(
        lambda: bench_run(one, shared_data, *args),
        lambda: bench_run(two, shared_data, *args, "--processes", "2"),
    ):
        ok(result)
    assert (entry(two) / "run.trec").read_bytes() == (entry(one) / "run.trec").read_bytes()
    assert (
        json.loads((entry(two) / "record.json").read_text())["metrics"]
        == json.loads((entry(one) / "record.json").read_text())["metrics"]
    )
    again = ok(bench_run(one, shared_data, *args, "--processes", "2"))
    assert "reusing" in again.stderr and "wrote" not in again.stderr


#: accelerate 1.15's launcher with the defaults it would otherwise warn about
ACCELERATE = (str(Path(sys.executable).with_name("accelerate")), "launch", "--num_machines", "1")
ACCELERATE += ("--mixed_precision", "no", "--dynamo_backend", "no", "--num_processes", "2")


def test_accelerate_launch_scores_in_two_ranks(
    shared_data: Path, tmp_path: Path, bm25_run_root: Path
) -> None:
    """`accelerate launch --multi_gpu --num_processes 2` starts 2 ranks on a CPU-only machine
    (torchrun underneath, gloo): each scores a shard, and the run file is the 1-process one.
    `--cpu --num_processes 2` starts one process (accelerate's CPU launcher needs mpirun for
    more), which the command says instead of silently running alone. The one-process run is
    the session's, conftest.BM25_RUN."""
    args = BM25_RUN
    one, two, cpu = bm25_run_root, tmp_path / "two", tmp_path / "cpu"
    # both at once: only the first starts a rendezvous (--cpu's one process binds no port)
    multi, result = at_once(
        lambda: bench_launch(two, shared_data, *args, launcher=(*ACCELERATE, "--multi_gpu")),
        lambda: bench_launch(cpu, shared_data, *args, launcher=(*ACCELERATE, "--cpu")),
    )
    ok(multi)
    assert (entry(two) / "run.trec").read_bytes() == (entry(one) / "run.trec").read_bytes()
    record = json.loads((entry(two) / "record.json").read_text())
    assert record["provenance"]["processes"] == 2
    assert record["latency"]["queries"] == 12  # both ranks' calls pooled
    ok(result)
    said = " ".join(result.stderr.split())
    assert "accelerate launch --cpu started one process" in said
    assert json.loads((entry(cpu) / "record.json").read_text())["provenance"]["processes"] == 1


@pytest.fixture(scope="module")
def monobert_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """monoBERT on MiniLM with its head as seeded, saved by the ranker (``--set checkpoint=DIR``
    scores it with no training): a real encoder that loads without sentence-transformers."""
    import torch

    from rankers import create_ranker

    torch.manual_seed(0)
    model = create_ranker("monobert")
    model.module  # noqa: B018 - loads the encoder and builds the head
    folder = tmp_path_factory.mktemp("monobert") / "checkpoint"
    model.save(folder)
    return folder


@pytest.mark.parametrize(
    ("target", "signame", "code"),
    [("parent", "SIGINT", 130), ("parent", "SIGTERM", 143), ("rank", "SIGINT", 130)],
)
def test_a_signal_stops_every_rank_and_writes_nothing(
    shared_data: Path,
    tmp_path: Path,
    monobert_checkpoint: Path,
    target: str,
    signame: str,
    code: int,
) -> None:
    """SIGINT or SIGTERM to the parent of --processes 2 (as a scheduler sends it), or to one
    rank: every rank ends within seconds, no entry is written, no process is left, one line
    says what was kept, and the exit code is 128 + the signal."""
    import signal
    import time

    import psutil

    command = [*BENCH, "run", "-d", "wikiqa", "--threads", "1", "-r", "monobert"]
    command += ["--set", f"checkpoint={monobert_checkpoint}", "--processes", "2"]
    # all 243 queries through a MiniLM cross-encoder: tens of seconds of scoring
    env = bench_env(shared_data, tmp_path, COLUMNS="200")
    # as from a terminal or a scheduler: SIGINT at its default (a shell that starts the tests in
    # the background, `cmd &`, passes SIGINT on ignored, and Python then keeps ignoring it)
    proc = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the main rank's first progress line: the ranks are scoring
            seen.append(line)
            if "monobert on wikiqa/test:" in line:
                break
        assert proc.poll() is None, "".join(seen)[-2000:]
        ranks = [
            p
            for p in psutil.Process(proc.pid).children()
            if "resource_tracker" not in " ".join(p.cmdline())
        ]
        assert len(ranks) == 2, [p.cmdline() for p in ranks]
        victim = proc.pid if target == "parent" else ranks[-1].pid
        sent = time.monotonic()
        os.kill(victim, getattr(signal, signame))
        _, rest = proc.communicate(timeout=60)
        took = time.monotonic() - sent
        stderr = "".join(seen) + rest
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, stderr[-2000:]
    assert took < 20, took
    time.sleep(0.5)
    left = [p.cmdline() for p in ranks if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left
    assert not list(tmp_path.glob("runs/*/*/*/record.json"))
    text = " ".join(stderr.split())
    assert "interrupted: finished results and trained models are kept" in text
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
