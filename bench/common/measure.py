"""What the benchmarks measure besides wall time: peak memory of processes, the machine, quantiles, when a
commit is in the lake; and the scratch folders of a run."""

from __future__ import annotations

import atexit
import contextlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
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


def seconds_until_in_lake(store: Any, control: Any, info: Any, since: float, timeout: float = 120.0) -> float:
    """Seconds from ``since`` (a ``perf_counter``) until the stream's checkpoint covers the server's
    current offset: a change committed at ``since`` is then in the lake.

    The benchmark's own process may be the stream's (``dag.test()``): polling must not take the CPU the stream
    needs. So the checkpoint's offset is read from its document alone (a whole database's checkpoint is a
    thousand tables' schema refs and chunks, and ``read_checkpoint`` parses them all), and the poll waits five
    times as long as the read took, 10 ms at least."""
    from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset, read_current_offset

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
