"""Operator arguments as Airflow renders them: native objects, or their text.

A templated argument arrives as the DAG wrote it (``rows_per_batch=4_000_000``), as a native object
rendered from a param (``render_template_as_native_obj``), or as the text Jinja rendered it to
(``"4000000"``, ``"['shop.orders']"``, ``"None"``). ``SplitOptions``, ``StreamOptions``, the verify
operators and the re-snapshot request turn such values into typed ones through these functions alone,
so an argument means the same on every operator and a bad one gets the same error: the argument's
name, the value, and what to set.

Light on purpose (no pyarrow, no driver): the options modules import it at DAG-parse time.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

_NONE_TEXTS = ("", "None", "null")


def is_none(value: Any) -> bool:
    """``None``, or the text a template renders ``None`` (or nothing) to."""
    return value is None or (isinstance(value, str) and value.strip() in _NONE_TEXTS)


def literal(name: str, value: Any) -> Any:
    """A list or mapping as given, or parsed from its rendered text (JSON or a Python literal); None
    for ``None`` or its text."""
    if is_none(value):
        return None
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise InvalidOptionError(
            f"{name} must be a list or mapping (JSON or a Python literal), not {value!r}"
        ) from None


def whole_number(name: str, value: Any) -> int:
    """A whole number >= 1."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
        raise InvalidOptionError(f"{name} must be a whole number >= 1, not {value!r}")
    return int(text)


def number(name: str, value: Any, kind: type[int] | type[float]) -> Any:
    """An ``int`` or ``float``; ranges are the options class's to check."""
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise InvalidOptionError(f"{name} must be a number, not {value!r}") from None


def optional_seconds(name: str, value: Any) -> float | None:
    """A number of seconds >= 0, or None."""
    return None if is_none(value) else seconds(name, value)


def seconds(name: str, value: Any) -> float:
    """A number of seconds >= 0."""
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise InvalidOptionError(f"{name} must be a number of seconds or None, not {value!r}") from None
    if math.isnan(result) or result < 0:
        raise InvalidOptionError(f"{name} must be >= 0, not {value!r}")
    return result


def flag(name: str, value: Any) -> bool:
    """``True`` or ``False``."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise InvalidOptionError(f"{name} must be True or False, not {value!r}")
    return text == "true"


def table_list(value: Any, name: str = "tables", *, required: bool = True) -> tuple[TableId, ...]:
    """``database.table`` names, each once: a list, its text, or a comma-separated string; at least one
    when ``required`` (else None, nothing or an empty list mean none)."""
    given = value
    if is_none(value):
        value = []
    if isinstance(value, str):
        text = value.strip()
        value = literal(name, text) if text.startswith(("[", "(")) else [t for t in text.split(",") if t.strip()]
    if not required and isinstance(value, Sequence) and not value:
        return ()
    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        raise InvalidOptionError(f"{name} must be a non-empty list of 'database.table', not {given!r}")
    tables = tuple(TableId.parse(str(t).strip()) for t in value)
    if len(set(tables)) != len(tables):
        raise InvalidOptionError(f"{name} names a table twice: {[str(t) for t in tables]}")
    return tables


def optional_text(value: Any) -> str | None:
    """A string, or None."""
    return None if is_none(value) else str(value)


def text_list(name: str, value: Any) -> tuple[str, ...]:
    """Strings (e.g. regular expressions): a list, its text, or one string."""
    if is_none(value):
        return ()
    if isinstance(value, str):
        text = value.strip()
        value = literal(name, text) if text.startswith(("[", "(")) else [text]
    if not isinstance(value, Sequence):
        raise InvalidOptionError(f"{name} must be a list of strings, not {value!r}")
    return tuple(str(v) for v in value)


def text_mapping(name: str, value: Any, example: str) -> dict[str, str]:
    """``{text: text}``, e.g. ``{"db.table": "column"}`` (``example`` shows one in the error)."""
    value = literal(name, value)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidOptionError(f"{name} must be a mapping like {example}, not {value!r}")
    return {str(k): str(v) for k, v in value.items()}
