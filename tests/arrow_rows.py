"""Arrow rows back as the canonical Python values of ``cdc.types``, for comparing in tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa


def canonical_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """UTC timestamps come back zone-aware from Arrow; canonical values are naive UTC."""
    return [
        tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) and v.tzinfo else v for v in row.values())
        for row in table.to_pylist()
    ]
