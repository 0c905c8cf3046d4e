"""Where the lake lives: a local path by default, anything pyarrow reaches otherwise.

Spark users write ``s3a://`` URIs; pyarrow knows the same buckets as ``s3://``, so the scheme is
mapped. pyarrow takes an S3 endpoint and credentials from the standard AWS variables
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``), as delta-rs does.

Small JSON documents (plans, manifests, checkpoints, the lease) must be seen whole or not at all:

- on a filesystem they are written to a temporary name and renamed into place (a rename is atomic
  there, a write in place is not: a reader could see the first half of a checkpoint);
- on an object store (S3, GCS, Azure) they are written in place with one upload: the object becomes
  visible only when the upload completes (a PUT, or the completion of a multipart upload), so a reader
  sees the old document or the new one, and a writer killed half-way leaves the old one. A "move"
  there is no rename but a server-side copy and a delete: two more requests, and a killed writer would
  leave its temporary object behind;
- on an object store a *read* can still be torn (a size request, then a ranged read, with a rewrite
  in between), so ``read_json`` reads again until it holds one whole document.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from airflow_provider_mysqlcdc.exceptions import LakeFormatError

_SCHEME_ALIASES = {"s3a://": "s3://", "s3n://": "s3://"}
_OBJECT_STORES = frozenset({"s3", "gcs", "abfs"})
"""pyarrow filesystems (``FileSystem.type_name``) whose uploads appear atomically and that have no rename."""
_READ_TRIES = 10


@dataclass(frozen=True)
class Lake:
    fs: pafs.FileSystem
    root: str

    @classmethod
    def at(cls, base_uri: str) -> Lake:
        """A plain path (relative ones to the working directory) is local; a URI names its filesystem."""
        if "://" not in base_uri:
            return cls(pafs.LocalFileSystem(), os.path.abspath(base_uri).rstrip("/"))
        for alias, scheme in _SCHEME_ALIASES.items():
            if base_uri.startswith(alias):
                base_uri = scheme + base_uri[len(alias) :]
        fs, root = pafs.FileSystem.from_uri(base_uri)
        return cls(fs, root.rstrip("/"))

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def exists(self, path: str) -> bool:
        return bool(self.fs.get_file_info(path).type != pafs.FileType.NotFound)

    def read_json(self, path: str) -> Any | None:
        """The document at ``path``, or None when there is none.

        On an object store a read can be torn although every write is whole: pyarrow asks for the
        object's size (HEAD), then reads that byte range (GET), and a writer replacing the object in
        between leaves a prefix of the new version (measured on moto's S3 server, a checkpoint document: about
        one read in six torn while it was rewritten in a loop). Every document is a JSON object, and no
        proper prefix of one parses, nor does one with other bytes after it, so a read that does not
        parse, or whose length is not the size it was read at, is a torn one and is read again."""
        if not self.exists(path):
            return None
        for attempt in range(1, _READ_TRIES + 1):
            with self.fs.open_input_file(path) as handle:
                size, raw = handle.size(), handle.read()
            problem = f"read {len(raw)} bytes of an object of {size}" if len(raw) != size else None
            if problem is None:
                try:
                    return json.loads(raw.decode("utf-8"))
                except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                    problem = str(error)
            if not self.object_store or attempt == _READ_TRIES:
                break
            time.sleep(0.02 * attempt)
        raise LakeFormatError(
            f"{path} is not one whole JSON document ({problem}"
            f"{f', {_READ_TRIES} reads' if self.object_store else ''}): it was damaged or written by another tool; "
            f"restore it from a copy, or delete it and the state it describes (see README 'Output layout')"
        )

    @property
    def object_store(self) -> bool:
        """True for S3, GCS and Azure: objects are uploaded whole, folders are only key prefixes."""
        return self.fs.type_name in _OBJECT_STORES

    def write_json(self, path: str, document: Any) -> None:
        """Replace the document at ``path`` atomically (see the module's docstring for how)."""
        # encoded before anything is opened: nothing can fail between opening the upload and its one write
        payload = json.dumps(document, separators=(",", ":")).encode("utf-8")
        if self.object_store:
            with self.fs.open_output_stream(path) as stream:
                stream.write(payload)
            return
        parent = path.rsplit("/", 1)[0]
        self.fs.create_dir(parent, recursive=True)
        temporary = f"{parent}/.{uuid.uuid4().hex}.tmp"
        with self.fs.open_output_stream(temporary) as stream:
            stream.write(payload)
        self.fs.move(temporary, path)

    def delete_dir(self, path: str) -> None:
        if self.exists(path):
            self.fs.delete_dir(path)
