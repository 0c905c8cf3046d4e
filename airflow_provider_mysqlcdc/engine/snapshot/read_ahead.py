"""Reading the next chunks while the last ones are written: an iterator drained by a thread of its own.

A snapshot task reads a chunk (the server sends rows, connectorx decodes them into Arrow) and then
writes it to Parquet; one after the other, the server waits while the task writes and the writer
waits while the server sends. connectorx and pyarrow's Parquet writer both release the GIL, so a
thread reading ahead overlaps the two in one process. The thread keeps items ready up to ``depth``:
items each weighing one, or their ``weight`` (a chunk of a table read ``g`` chunks at a time weighs
``1/g``, so that many tables' chunks ready together hold no more than one read group's bytes); what it
raises is raised to the consumer at the item where it happened, and a consumer that stops early (an
error while writing, a closed generator) stops the thread before the source is closed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Generic, TypeVar

T = TypeVar("T")
_POLL_SECONDS = 0.1
"""How often a producer blocked on a full queue looks whether the consumer has gone."""


class _End:
    """The producer's last item: the source ended, with this error or none."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class _Producer(threading.Thread, Generic[T]):
    def __init__(self, items: Iterator[T], depth: Fraction, weight: Callable[[T], Fraction]) -> None:
        super().__init__(name="snapshot-read-ahead", daemon=True)
        self.items = items
        self.depth = depth
        self.weight = weight
        self.ready: queue.SimpleQueue[tuple[T | _End, Fraction]] = queue.SimpleQueue()
        self.pending = Fraction(0)  # the weight of the items ready, not yet taken
        self.room = threading.Condition()
        self.stopping = threading.Event()

    def run(self) -> None:
        error: BaseException | None = None
        try:
            for item in self.items:
                if not self._put(item, self.weight(item)):
                    break
        except BaseException as exc:  # handed to the consumer, which raises it in its own thread
            error = exc
        finally:
            close = getattr(self.items, "close", None)
            if close is not None:  # a generator stopped between two items ends here, in its own thread
                close()
        self._put(_End(error), Fraction(0))

    def _put(self, item: T | _End, weight: Fraction) -> bool:
        """False when the consumer has gone (the item is dropped). An item heavier than ``depth`` waits
        until nothing else is ready."""
        with self.room:
            while self.pending and self.pending + weight > self.depth:
                if self.stopping.is_set():
                    return False
                self.room.wait(_POLL_SECONDS)
            if self.stopping.is_set():
                return False
            self.pending += weight
        self.ready.put((item, weight))
        return True

    def take(self) -> T | _End:
        item, weight = self.ready.get()
        with self.room:
            self.pending -= weight
            self.room.notify()
        return item


def read_ahead(items: Iterator[T], depth: int | Fraction,
               weight: Callable[[T], Fraction] = lambda item: Fraction(1)) -> Iterator[T]:
    """``items`` in their order, produced by a thread ahead of the consumer while the items ready weigh at
    most ``depth`` together (each ``weight(item)``; by default one). The source is iterated in that thread
    only; it is done (or stopped between two items) when this generator ends, so the caller may close what
    the source reads from afterwards."""
    if depth <= 0:
        raise ValueError(f"read_ahead needs a depth above 0, not {depth}")
    producer: _Producer[T] = _Producer(items, Fraction(depth), weight)
    producer.start()
    try:
        while True:
            item = producer.take()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        producer.stopping.set()
        producer.join()
