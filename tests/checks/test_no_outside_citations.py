"""Nothing in the repository cites a file outside it: a person who clones the project has only what git
gives them. The design the code relies on is in ``docs/design/``; a citation names a page there."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.checks

ROOT = Path(__file__).resolve().parents[2]
_NAMES = ("DESIGN" + r"\.md", "DESIGN" + " invariant", "AIRFLOW" + r"\.md", r"\.\." + "/shared" + r"\b")
OUTSIDE = re.compile("|".join(_NAMES).encode())
"""Names of documents kept beside the repository, never in it (spelled in parts, so this file names none)."""


def repository_files() -> list[Path]:
    """The files git knows: tracked, and new ones not ignored (so a citation is caught before its commit)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_no_file_cites_a_document_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    citing = []
    for path in repository_files():
        if path.resolve() == this or not path.is_file():  # a file deleted but not yet committed
            continue
        for number, line in enumerate(path.read_bytes().splitlines(), 1):
            if OUTSIDE.search(line):
                citing.append(f"{path.relative_to(ROOT)}:{number}: {line.decode(errors='replace').strip()[:100]}")
    assert not citing, "cite docs/design/ instead:\n" + "\n".join(citing)
