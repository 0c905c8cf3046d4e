"""The lake's small JSON documents on a pyarrow filesystem (the lake handle, ``lake.handle``, gives the
filesystem and the paths).

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
import time
import uuid
from typing import TYPE_CHECKING, Any

from airflow_provider_mysqlcdc.exceptions import LakeFormatError

if TYPE_CHECKING:
    import pyarrow.fs as pafs

_OBJECT_STORES = frozenset({"s3", "gcs", "abfs"})
"""pyarrow filesystems (``FileSystem.type_name``) whose uploads appear atomically and that have no rename."""
_READ_TRIES = 10


def exists(fs: pafs.FileSystem, path: str) -> bool:
    import pyarrow.fs as pafs  # the handle (``lake.handle``) is made at parse time; pyarrow waits for I/O

    return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)


def is_object_store(fs: pafs.FileSystem) -> bool:
    """True for S3, GCS and Azure: objects are uploaded whole, folders are only key prefixes."""
    return fs.type_name in _OBJECT_STORES


def is_local(fs: pafs.FileSystem) -> bool:
    """True for this machine's filesystem (where a file can be linked into place only if its name is free)."""
    return bool(fs.type_name == "local")


def read_json(fs: pafs.FileSystem, path: str) -> Any | None:
    """The document at ``path``, or None when there is none.

    On an object store a read can be torn although every write is whole: pyarrow asks for the
    object's size (HEAD), then reads that byte range (GET), and a writer replacing the object in
    between leaves a prefix of the new version (measured on moto's S3 server, a checkpoint document: about
    one read in six torn while it was rewritten in a loop). Every document is a JSON object, and no
    proper prefix of one parses, nor does one with other bytes after it, so a read that does not
    parse, or whose length is not the size it was read at, is a torn one and is read again."""
    if not exists(fs, path):
        return None
    object_store = is_object_store(fs)
    for attempt in range(1, _READ_TRIES + 1):
        with fs.open_input_file(path) as handle:
            size, raw = handle.size(), handle.read()
        problem = f"read {len(raw)} bytes of an object of {size}" if len(raw) != size else None
        if problem is None:
            try:
                return json.loads(raw.decode("utf-8"))
            except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                problem = str(error)
        if not object_store or attempt == _READ_TRIES:
            break
        time.sleep(0.02 * attempt)
    raise LakeFormatError(
        f"{path} is not one whole JSON document ({problem}"
        f"{f', {_READ_TRIES} reads' if object_store else ''}): it was damaged or written by another tool; "
        f"restore it from a copy, or delete it and the state it describes (see the docs' page 'Output layout')"
    )


def write_json(fs: pafs.FileSystem, path: str, document: Any) -> None:
    """Replace the document at ``path`` atomically (see the module's docstring for how)."""
    # encoded before anything is opened: nothing can fail between opening the upload and its one write
    payload = json.dumps(document, separators=(",", ":")).encode("utf-8")
    if is_object_store(fs):
        with fs.open_output_stream(path) as stream:
            stream.write(payload)
        return
    parent = path.rsplit("/", 1)[0]
    fs.create_dir(parent, recursive=True)
    temporary = f"{parent}/.{uuid.uuid4().hex}.tmp"
    with fs.open_output_stream(temporary) as stream:
        stream.write(payload)
    fs.move(temporary, path)
