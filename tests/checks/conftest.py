"""The package as a user gets it, built once per test session and shared by the checks that need it.

``python -m build`` makes the sdist and then the wheel from that sdist (so a file missing from the
sdist shows up as a broken wheel); the wheel checks read it and the install check installs it into a
fresh virtualenv. The build runs on a copy of the files git knows (tracked and new, not ignored), so
it leaves no ``build/`` or ``*.egg-info`` in the working tree and sees uncommitted changes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class BuiltDistributions:
    wheel: Path
    sdist: Path


def _source_copy(dest: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet staged is still listed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltDistributions:
    """The sdist and the wheel ``python -m build`` makes of the source tree (``build`` is a test extra)."""
    work = tmp_path_factory.mktemp("dist")
    source = _source_copy(work / "src")
    out = work / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=540,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (wheel,) = out.glob("airflow_provider_mysqlcdc-*-py3-none-any.whl")
    (sdist,) = out.glob("airflow_provider_mysqlcdc-*.tar.gz")
    return BuiltDistributions(wheel=wheel, sdist=sdist)
