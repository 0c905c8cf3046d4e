"""The lake's JSON documents, versioned: every earlier format is read, the current one is written.

Each kind of document (the snapshot plan, a batch manifest, the stream checkpoint, the lease, a
verification report) is a typed model whose ``to_dict`` goes through :meth:`DocumentFormat.write` and
whose ``from_dict`` goes through :meth:`DocumentFormat.read`. A document on disk carries its
``format_version``; reading one of an earlier version upgrades it in code, one small function per
version step (``upgrades[n]`` turns version ``n`` into ``n + 1``), so the model reads the current
shape only. A change of a document's shape therefore bumps its version and adds one step; a lake
written by any earlier release keeps working, and the next write stores the current version.

A document of a *newer* version is refused (``NewerLakeFormatError``): this code cannot know what
the newer fields mean, and writing it back in the older shape would drop them. A few formats from
before the first release kept their data elsewhere (not in the document alone) and cannot be
upgraded by a step: they are ``retired``, and refused with what to do (``RetiredLakeFormatError``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_mysqlcdc.exceptions import LakeFormatError, NewerLakeFormatError, RetiredLakeFormatError

VERSION_KEY = "format_version"

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]
"""One version step: a document of version ``n`` (without its ``format_version``) as version ``n + 1``."""


@dataclass(frozen=True)
class DocumentFormat:
    """How one kind of lake document is versioned.

    ``version`` is the one written. ``upgrades`` has a step from every version from ``oldest`` up to
    ``version``; ``retired`` names the versions below ``oldest`` and why they cannot be read (with what
    to do). ``unversioned`` is the version of a document without ``format_version``, one written before
    the field existed (None: every document of this kind has one)."""

    name: str
    version: int
    oldest: int
    upgrades: Mapping[int, Upgrade] = field(default_factory=dict)
    unversioned: int | None = None
    retired: Mapping[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if set(self.upgrades) != set(range(self.oldest, self.version)):
            raise ValueError(f"the {self.name} format needs one upgrade step from each version "
                             f"{self.oldest}..{self.version - 1}, it has steps from {sorted(self.upgrades)}")
        if any(v >= self.oldest for v in self.retired):
            raise ValueError(f"the {self.name} format retires versions it reads: {sorted(self.retired)}")

    def write(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The document on disk: ``body`` (the current shape) under the current ``format_version``."""
        return {VERSION_KEY: self.version, **body}

    def read(self, document: Any, where: str = "") -> dict[str, Any]:
        """``document`` as read from ``where`` (a path, for the errors), upgraded to the current version
        and without its ``format_version``; refused when newer, retired or not a versioned document."""
        what = f"the {self.name}{f' {where}' if where else ''}"
        if not isinstance(document, dict):
            raise LakeFormatError(f"{what} is not a JSON object but {type(document).__name__}: it was damaged or "
                                  f"written by another tool; restore it from a copy")
        stated = document.get(VERSION_KEY, self.unversioned)
        version = stated if isinstance(stated, int) and not isinstance(stated, bool) else None
        if version is not None and version in self.retired:
            named = f"format_version {version}" if VERSION_KEY in document else f"no format_version (format {version})"
            raise RetiredLakeFormatError(f"{what} has {named}: {self.retired[version]}")
        if version is None or version < self.oldest:
            raise LakeFormatError(
                f"{what} has format_version {document.get(VERSION_KEY)!r}, not a format this or any version of "
                f"airflow-provider-mysqlcdc writes (this one reads formats {self.oldest} to {self.version}): it was "
                f"damaged or written by another tool; restore it from a copy")
        if version > self.version:
            raise NewerLakeFormatError(
                f"{what} has format_version {version}, written by a newer version of airflow-provider-mysqlcdc; "
                f"this one reads formats {self.oldest} to {self.version}. Upgrade airflow-provider-mysqlcdc "
                f"wherever the lake is written or read (the Airflow workers, the triggerer, the Spark jobs' "
                f"Python), and run one version against a lake")
        body = {k: v for k, v in document.items() if k != VERSION_KEY}
        for step in range(version, self.version):
            body = self.upgrades[step](body)
        return body
