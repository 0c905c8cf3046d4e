"""The package as a user gets it, built once per test session and shared by the checks that need it.

``python -m build`` makes the sdist and then the wheel from that sdist (so a file missing from the
sdist shows up as a broken wheel); the wheel checks read it and the install check installs it into a
fresh virtualenv. The build runs on a copy of the files git knows (tracked and new, not ignored), so
it leaves no ``build/`` or ``*.egg-info`` in the working tree and sees uncommitted changes.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.checks.distributions import BuiltDistributions, source_copy


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltDistributions:
    """The sdist and the wheel ``python -m build`` makes of the source tree (``build`` is a test extra)."""
    work = tmp_path_factory.mktemp("dist")
    source = source_copy(work / "src")
    out = work / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=540,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (wheel,) = out.glob("airflow_provider_mysqlcdc-*-py3-none-any.whl")
    (sdist,) = out.glob("airflow_provider_mysqlcdc-*.tar.gz")
    return BuiltDistributions(wheel=wheel, sdist=sdist)
