"""Fixtures of the unit tests (no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lakes import Lakes


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lakes:
    """An empty lake of ``shop.orders`` on a temporary folder."""
    return Lakes(str(tmp_path / "lake"), monkeypatch)
