"""Headless Chromium on the deployment's pages (the flags of docs/design/airflow.md), and what a screenshot shows."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from collections import Counter

import pytest


def chromium(url: str, *flags: str, dump_dom: bool = True) -> tuple[str, str]:
    """Headless chromium on ``url`` with the flags docs/design/airflow.md explains; its stdout (the DOM with
    ``dump_dom``)."""
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("chromium is missing: run dev/setup.sh (it installs Debian's chromium)")
    args = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
            "--virtual-time-budget=20000", *flags, *(["--dump-dom"] if dump_dom else []), url]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr, done.stdout


def png_facts(data: bytes) -> tuple[int, int, int, float]:
    """Width, height, distinct colours (of a sample) and the share of pixels unlike the most common
    colour, decoding the 8-bit RGB(A) PNG that chromium writes."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, color_type = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color_type in (2, 6), (depth, color_type)
    channels = 3 if color_type == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    previous, counts = bytearray(stride), Counter()
    for y in range(height):
        kind, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = row[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                row[i] = (row[i] + left) & 0xFF
            elif kind == 2:
                row[i] = (row[i] + up) & 0xFF
            elif kind == 3:
                row[i] = (row[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                row[i] = (row[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        if y % 4 == 0:
            counts.update(bytes(row[x:x + 3]) for x in range(0, stride, channels * 4))
        previous = row
    total = sum(counts.values())
    return width, height, len(counts), 1 - counts.most_common(1)[0][1] / total
