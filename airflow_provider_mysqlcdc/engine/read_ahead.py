"""Reading the next chunks while the last ones are written: an iterator drained by a thread of its own.

A snapshot task reads a chunk (the server sends rows, connectorx decodes them into Arrow) and then
writes it to Parquet; one after the other, the server waits while the task writes and the writer
waits while the server sends. connectorx and pyarrow's Parquet writer both release the GIL, so a
thread reading ahead overlaps the two in one process. The thread keeps at most ``depth`` items ready;
what it raises is raised to the consumer at the item where it happened, and a consumer that stops
early (an error while writing, a closed generator) stops the thread before the source is closed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
_POLL_SECONDS = 0.1
"""How often a producer blocked on a full queue looks whether the consumer has gone."""


class _End:
    """The producer's last item: the source ended, with this error or none."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class _Producer(threading.Thread, Generic[T]):
    def __init__(self, items: Iterator[T], depth: int) -> None:
        super().__init__(name="snapshot-read-ahead", daemon=True)
        self.items = items
        self.ready: queue.Queue[T | _End] = queue.Queue(maxsize=depth)
        self.stopping = threading.Event()

    def run(self) -> None:
        error: BaseException | None = None
        try:
            for item in self.items:
                if not self._put(item):
                    break
        except BaseException as exc:  # handed to the consumer, which raises it in its own thread
            error = exc
        finally:
            close = getattr(self.items, "close", None)
            if close is not None:  # a generator stopped between two items ends here, in its own thread
                close()
        self._put(_End(error))

    def _put(self, item: T | _End) -> bool:
        """False when the consumer has gone (the item is dropped)."""
        while not self.stopping.is_set():
            try:
                self.ready.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False


def read_ahead(items: Iterator[T], depth: int) -> Iterator[T]:
    """``items`` in their order, produced by a thread up to ``depth`` items ahead of the consumer. The
    source is iterated in that thread only; it is done (or stopped between two items) when this generator
    ends, so the caller may close what the source reads from afterwards."""
    if depth < 1:
        raise ValueError(f"read_ahead needs a depth of at least 1, not {depth}")
    producer: _Producer[T] = _Producer(items, depth)
    producer.start()
    try:
        while True:
            item = producer.ready.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        producer.stopping.set()
        producer.join()
