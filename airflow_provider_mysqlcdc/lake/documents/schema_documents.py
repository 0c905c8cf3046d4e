"""Table schemas stored once each, named by their content, so the stream's checkpoint only names them.

A stream of a thousand tables rewrote every table's columns with every batch when the checkpoint held
them: its size, and the time to write it, followed the number of captured tables, not the changes. A
schema rarely changes, so each one is a document of its own under ``_stream/schemas/<ref>.json``, where
``ref`` is a hash of its content (:func:`schema_ref`); the checkpoint holds refs, and a batch writes the
documents of schemas it names for the first time, before the checkpoint that names them. A document is
never rewritten with other content (another content is another ref), so:

- a torn run cannot lose a schema: a checkpoint is written only after every document it names, and the
  older checkpoint's documents stay;
- a ref read once is cached for the process (``_LOADED``): it names the same schema on every later read,
  so readers polling the checkpoint (the asset trigger, ``read_table``) read each document once.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from typing import Any

from airflow_provider_mysqlcdc.cdc.schema.table import TableSchema
from airflow_provider_mysqlcdc.exceptions import LakeFormatError
from airflow_provider_mysqlcdc.lake.documents.versions import DocumentFormat
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.parallel import each

SCHEMA_FORMAT = DocumentFormat("table schema", version=1, oldest=1)
"""1: a ``TableSchema.to_dict`` (format 4 of the checkpoint names these)."""

_REF_HEX = 32
"""128 bits of SHA-256: no two schemas of a lake share a ref."""
_IO_THREADS = 8
"""Documents read or written at once (object stores answer each in tens of milliseconds)."""

_REFS: dict[int, tuple[TableSchema, str]] = {}
"""``schema_ref`` by the schema object's identity (the object is kept, so its id is not reused): a batch
names every captured table's schema, almost always the same objects as the batch before."""
_LOADED: dict[tuple[str, str], TableSchema] = {}
"""Schemas read or written, by lake and ref: a ref's content never changes."""
_LOCK = threading.Lock()


def schema_ref(schema: TableSchema) -> str:
    """The name of ``schema``'s document: a hash of its canonical JSON (equal schemas, one ref)."""
    known = _REFS.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    body = json.dumps(SCHEMA_FORMAT.write(schema.to_dict()), sort_keys=True, separators=(",", ":"))
    ref = hashlib.sha256(body.encode("utf-8")).hexdigest()[:_REF_HEX]
    with _LOCK:
        _REFS[id(schema)] = (schema, ref)
    return ref


class SchemaDocuments:
    """The schema documents of one lake: read by ref, written once each by the stream's writer."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self._stored: set[str] = set()
        """Refs this writer read or wrote: documents known to be in the lake."""

    def load(self, refs: Iterable[str], where: str) -> dict[str, TableSchema]:
        """The schemas of ``refs`` (named by the document at ``where``, for the errors); those not read
        before in this process are read at once."""
        wanted = set(refs)
        missing = [r for r in wanted if (self.lake.base_uri, r) not in _LOADED]
        if missing:
            read = each(lambda r: self._read(r, where), missing, _IO_THREADS, "schema-read")
            for ref, schema in zip(missing, read, strict=True):
                with _LOCK:
                    _LOADED[(self.lake.base_uri, ref)] = schema
        self._stored |= wanted
        return {r: _LOADED[(self.lake.base_uri, r)] for r in wanted}

    def store(self, schemas: Iterable[TableSchema]) -> None:
        """Write the documents of ``schemas`` that this writer has not read or written yet (each once)."""
        new = {schema_ref(s): s for s in schemas}
        new = {r: s for r, s in new.items() if r not in self._stored}
        if not new:
            return
        each(lambda item: self._write(*item), list(new.items()), _IO_THREADS, "schema-write")  # one: inline
        self._stored |= set(new)

    def _write(self, ref: str, schema: TableSchema) -> None:
        self.lake.write_json(self.lake.schema_document(ref), SCHEMA_FORMAT.write(schema.to_dict()))
        with _LOCK:
            _LOADED[(self.lake.base_uri, ref)] = schema

    def _read(self, ref: str, where: str) -> TableSchema:
        path = self.lake.schema_document(ref)
        document: Any = self.lake.read_json(path)
        if document is None:
            raise LakeFormatError(f"the stream checkpoint {where} names the table schema {ref}, but {path} is missing: "
                                  f"the lake's _stream folder was copied or restored in part; restore it whole")
        return TableSchema.from_dict(SCHEMA_FORMAT.read(document, path))
