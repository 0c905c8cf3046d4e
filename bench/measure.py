"""What the peer benchmark measures besides wall time: peak memory of processes, and the machine."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any


def _rss_kib(pid: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


class PeakRss:
    """Samples every 0.2 s the resident memory of processes whose command line holds one of a group's
    markers (and none of its exclusions): the peak of their sum and of the largest one, per group."""

    def __init__(self, groups: dict[str, tuple[Sequence[bytes], Sequence[bytes]]]) -> None:
        self.groups = groups
        self.peak_total = dict.fromkeys(groups, 0)
        self.peak_single = dict.fromkeys(groups, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            lines = {p: _cmdline(p) for p in pids}
            for group, (markers, exclusions) in self.groups.items():
                sizes = [_rss_kib(p) for p, line in lines.items()
                         if any(m in line for m in markers) and not any(x in line for x in exclusions)]
                self.peak_total[group] = max(self.peak_total[group], sum(sizes))
                self.peak_single[group] = max(self.peak_single[group], max(sizes, default=0))

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def child_peak_rss_mib(command: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    """Run a command; its peak resident memory (the kernel's own high-water mark) and its stdout."""
    process = subprocess.Popen(list(command), env=env, cwd=cwd, stdout=subprocess.PIPE, text=True)
    out = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{command[:4]} failed with exit code {process.returncode}")
    return usage.ru_maxrss / 1024, out


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextlib.contextmanager
def timer() -> Iterator[list[float]]:
    """``with timer() as t: ...`` then ``t[0]`` is the elapsed seconds."""
    import time

    elapsed: list[float] = []
    started = time.perf_counter()
    yield elapsed
    elapsed.append(time.perf_counter() - started)


def machine(server_version: str) -> dict[str, Any]:
    """The facts RESULTS.md states with its figures: cores, memory and the versions involved."""
    from importlib.metadata import version

    memory_kib = int(next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal"))
                     .split()[1])
    return {
        "cores": os.cpu_count(),
        "memory": f"{memory_kib / 1024 / 1024:.1f} GiB",
        "cpu": next((x.split(":", 1)[1].strip() for x in Path("/proc/cpuinfo").read_text().splitlines()
                     if x.startswith("model name")), platform.processor()),
        "server": server_version,
        "python": platform.python_version(),
        **{name: version(name) for name in ("apache-airflow", "pyspark", "mysql-replication", "pyarrow",
                                            "connectorx", "airflow-provider-mysqlcdc")},
    }


def write_sections(results: Path, text: str) -> None:
    """Write ``text``'s ``## `` sections into ``results``, replacing sections of the same title and keeping
    the others (each benchmark owns its sections of RESULTS.md); ``text``'s heading, if any, comes first."""
    def split(document: str) -> tuple[str, dict[str, str]]:
        head, *sections = document.split("\n## ")
        return head, {s.split("\n", 1)[0]: "## " + s.rstrip("\n") for s in sections}

    old_head, old = split(results.read_text()) if results.exists() else ("# Benchmark results", {})
    new_head, new = split(text if text.startswith("#") and not text.startswith("## ") else "\n" + text)
    sections = {**old, **new} if new_head.strip() == "" else {**new, **{t: s for t, s in old.items() if t not in new}}
    head = new_head.strip() or old_head.strip()
    results.write_text("\n\n".join([head, *sections.values()]) + "\n")


def old_new_parser(description: str | None) -> argparse.ArgumentParser:
    """The options of a benchmark of two commits (``old_against_new``): ``--old``, ``--new``, ``--repeat``, and
    ``--child`` for its child processes; the benchmark adds its own."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", default="main", help="the commit before (main)")
    parser.add_argument("--new", default="HEAD", help="the commit after (this branch)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each version")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def old_new_heading(section: str, module: str, repeat: int, old: str, new: str, load: tuple[float, float]) -> list[str]:
    """The first lines of a two-commit benchmark's section (``old_against_new``): what wrote it, when, the
    machine, and the two versions (``old``/``new``: the commit and what it does)."""
    facts = ", ".join(f"{k} {v}" for k, v in machine("none").items() if k != "server")
    return [f"## {section}", "",
            f"Written by `.venv/bin/python -m {module}` (not by `bench.peers`). {dt.date.today().isoformat()}, "
            f"{repeat} runs of each version, alternating; {facts}. Old: {old}; new: {new}. Each version in its own "
            f"process importing its own tree. Load average {load[0]:.1f} at the start, {load[1]:.1f} at the end "
            f"(other jobs shared the cores).", ""]


def old_against_new(args: Any, child_main: Callable[[dict[str, Any]], int], measure: Callable[[Any], tuple[Any, Any]],
                    report: Callable[[Any, Any, Any, tuple[float, float]], str]) -> int:
    """The main of a benchmark that runs two commits' trees in child processes: in a child (``args.child``, its
    spec as JSON) the measurement; else ``measure``'s runs reported (with the load average at the start and the
    end) and written into bench/RESULTS.md."""
    if args.child:
        return child_main(json.loads(args.child))
    start_load = os.getloadavg()[0]
    runs, commits = measure(args)
    text = report(runs, commits, args, (start_load, os.getloadavg()[0]))
    print(text)
    write_sections(Path(__file__).resolve().parent / "RESULTS.md", text)
    return 0


def seconds_until_in_lake(store: Any, control: Any, info: Any, since: float, timeout: float = 120.0) -> float:
    """Seconds from ``since`` (a ``perf_counter``) until the stream's checkpoint covers the server's
    current offset: a change committed at ``since`` is then in the lake.

    The benchmark's own process may be the stream's (``dag.test()``): polling must not take the CPU the stream
    needs. So the checkpoint's offset is read from its document alone (a whole database's checkpoint is a
    thousand tables' schema refs and chunks, and ``read_checkpoint`` parses them all), and the poll waits five
    times as long as the read took, 10 ms at least."""
    from airflow_provider_mysqlcdc.cdc.offset import BinlogOffset, read_current_offset

    target = read_current_offset(control, info, with_gtid=False)
    while True:
        read = time.perf_counter()
        document = store.lake.read_json(store.checkpoint_path)
        if document is not None and not BinlogOffset.from_dict(document["offset"]) < target:
            return time.perf_counter() - since
        if time.perf_counter() - since > timeout:
            raise TimeoutError(f"a change committed {timeout:.0f} s ago is not in the lake")
        time.sleep(max(0.01, 5 * (time.perf_counter() - read)))


def scratch_dir(prefix: str) -> str:
    """A new temporary folder, removed when the benchmark's process exits (lakes and Airflow homes of a
    run take tens of MB each)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path
