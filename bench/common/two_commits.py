"""Two commits' code side by side on one machine in one run: a ``git worktree`` per commit, each measurement
in a child process importing that tree's package, the two taking turns so that a drift of the machine's load
hits both alike (the benchmarks of a change: its commit against the one before)."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.common.measure import machine
from bench.common.results import RESULTS, write_sections

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "airflow_provider_mysqlcdc"
PASSWORD_ENV = "MYSQL_CDC_PASSWORD"


def short_commit(ref: str) -> str:
    """``ref`` (a branch, HEAD, a commit) as its short commit id."""
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", ref], check=True, capture_output=True,
                          text=True).stdout.strip()


@contextlib.contextmanager
def worktrees(commits: dict[str, str]) -> Iterator[dict[str, Path]]:
    """A detached ``git worktree`` per commit in a temporary directory, byte-compiled; removed after."""
    with tempfile.TemporaryDirectory(prefix="bench-delta-trees-") as base:
        trees: dict[str, Path] = {}
        try:
            for label, commit in commits.items():
                trees[label] = Path(base) / label
                subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--quiet", "--detach", str(trees[label]),
                                commit], check=True)
                package = trees[label] / PACKAGE
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
            yield trees
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
            subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False)


def run_child(tree: Path, spec: dict[str, Any], password: str, script: str) -> dict[str, Any]:
    """One measurement in a process importing ``tree``'s package, by ``script --child`` (the benchmark's file);
    its result: the child's last line ``RESULT <json>``."""
    with tempfile.TemporaryDirectory(prefix="bench-package-") as only:
        # the tree's package alone, ahead of this checkout: the package comes from the tree, ``bench`` (the
        # helpers the child imports) from this checkout, whatever an older tree's bench/ holds
        (Path(only) / PACKAGE).symlink_to(tree / PACKAGE)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([only, str(ROOT)]), PASSWORD_ENV: password}
        # the script by its path, from a folder of no checkout: nothing else on the path holds the package
        command = [sys.executable, str(Path(script).resolve()), "--child", json.dumps({**spec, "tree": str(tree)})]
        out = subprocess.run(command, env=env, cwd=tempfile.gettempdir(), check=True, capture_output=True,
                             text=True).stdout
    return json.loads(next(line for line in reversed(out.splitlines()) if line.startswith("RESULT "))[7:])


def check_tree(spec: dict[str, Any]) -> None:
    """In the child: stop unless the package imported is the tree's (``spec["tree"]``)."""
    import airflow_provider_mysqlcdc

    package = Path(airflow_provider_mysqlcdc.__file__).resolve().parent
    if package.parent != Path(spec["tree"]).resolve():
        raise SystemExit(f"imported {package}, not the package of {spec['tree']}")


def alternate(trees: dict[str, Any], repeat: int) -> Iterator[tuple[int, str, Any]]:
    """old, new; new, old; old, new; ... so that a drift of the machine's load hits both alike."""
    labels = list(trees)
    for attempt in range(repeat):
        for label in labels if attempt % 2 == 0 else labels[::-1]:
            yield attempt, label, trees[label]


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
    write_sections(RESULTS, text)
    return 0
