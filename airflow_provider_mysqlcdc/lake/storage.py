"""Where the lake lives: a local path by default, anything pyarrow reaches otherwise.

Spark users write ``s3a://`` URIs; pyarrow knows the same buckets as ``s3://``, so the scheme is
mapped. Small JSON documents (plans, manifests, checkpoints) are written whole to a temporary name
and moved into place, so a reader sees either the old document or the new one, never half of one
(on object stores a single PUT is atomic already).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

_SCHEME_ALIASES = {"s3a://": "s3://", "s3n://": "s3://"}


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
        if not self.exists(path):
            return None
        with self.fs.open_input_stream(path) as stream:
            return json.loads(stream.read().decode("utf-8"))

    def write_json(self, path: str, document: Any) -> None:
        parent = path.rsplit("/", 1)[0]
        self.fs.create_dir(parent, recursive=True)
        temporary = f"{parent}/.{uuid.uuid4().hex}.tmp"
        with self.fs.open_output_stream(temporary) as stream:
            stream.write(json.dumps(document, separators=(",", ":")).encode("utf-8"))
        self.fs.move(temporary, path)

    def delete_dir(self, path: str) -> None:
        if self.exists(path):
            self.fs.delete_dir(path)

    def list_dirs(self, path: str) -> list[str]:
        if not self.exists(path):
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(path))
        return sorted(i.path for i in infos if i.type == pafs.FileType.Directory)
