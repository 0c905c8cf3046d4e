"""What the split's and the stream's options share: the tables they take and the lake they write.

Both tasks of a pipeline name the same tables (named, or matched by patterns) and the same lake, and
must check both the same way before touching the source or the lake; the two option classes declare
the fields (their order and defaults are theirs) and take the lake, the selection and the checks from here.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from airflow_provider_mysqlcdc.cdc.schema.discovery import TableSelection
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError
from airflow_provider_mysqlcdc.lake.handle import Lake


class CapturedLake:
    """A mixin of the option dataclasses: ``base_uri`` and ``storage_options`` reach the lake, the other
    fields choose the tables."""

    base_uri: str
    storage_options: Mapping[str, str]
    tables: tuple[TableId, ...]
    include_databases: str | None
    include_tables: str | None
    exclude_tables: tuple[str, ...]
    include_online_schema_change_tables: bool

    @functools.cached_property
    def lake(self) -> Lake:
        return Lake.at(self.base_uri, self.storage_options)

    def selection(self) -> TableSelection:
        """The tables to take: named, or matched by patterns."""
        return TableSelection(self.tables, self.include_databases, self.include_tables, self.exclude_tables,
                              self.include_online_schema_change_tables)

    def check_lake_and_tables(self) -> None:
        """The lake named and the patterns valid, before the task touches the source or the lake."""
        if not self.base_uri:
            raise InvalidOptionError("base_uri must name the lake (a local path or s3://bucket/prefix)")
        self.selection()
