"""Reading many tables' documents and logs at once.

A whole database is hundreds of tables, and each of their plans, manifests and Delta logs is a read of its
own: on an object store a round trip each, on a filesystem a few milliseconds of work in delta-rs or
pyarrow, both without the GIL. One helper runs such reads on a bounded pool, in order, so that callers
keep the shape of a loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

READ_THREADS = 16
"""Reads at once: enough to hide an object store's round trips, few enough for a small machine."""


def each(work: Callable[[T], R], items: Sequence[T], threads: int = READ_THREADS, name: str = "lake-read") -> list[R]:
    """``work`` of each item, results in the items' order, at most ``threads`` at once. Returns when all are
    done and raises the first error (in the items' order); nothing is left running."""
    if len(items) <= 1 or threads <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(min(threads, len(items)), thread_name_prefix=name) as pool:
        futures = [pool.submit(work, item) for item in items]
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    return [f.result() for f in futures]
