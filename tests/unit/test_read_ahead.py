"""Reading ahead in a thread (``engine.snapshot.read_ahead``): the items arrive in order, the source runs in its
own thread at most ``depth`` items ahead, its error reaches the consumer where it happened, and a
consumer that stops early leaves the source closed before it returns."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from fractions import Fraction

import pytest

from airflow_provider_mysqlcdc.engine.snapshot.read_ahead import read_ahead


def test_items_arrive_in_order_from_another_thread() -> None:
    threads: list[str] = []

    def source() -> Iterator[int]:
        for i in range(100):
            threads.append(threading.current_thread().name)
            yield i

    assert list(read_ahead(source(), 3)) == list(range(100))
    assert set(threads) == {"snapshot-read-ahead"}


def counted(produced: list[int]) -> Iterator[int]:
    """0 to 49, each appended to ``produced`` as it is produced."""
    for i in range(50):
        produced.append(i)
        yield i


def produced_after(produced: list[int], at_least: int) -> int:
    """How many items were produced once at least ``at_least`` were and the source had time to run further
    ahead, were it allowed to."""
    deadline = time.monotonic() + 30
    while len(produced) < at_least and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    return len(produced)


def test_the_source_runs_at_most_depth_items_ahead() -> None:
    produced: list[int] = []
    reader = read_ahead(counted(produced), 2)
    assert next(reader) == 0
    # one item taken, two ready in the queue, one more produced and waiting to be put
    assert produced_after(produced, 4) == 4
    reader.close()


def test_an_error_of_the_source_reaches_the_consumer_after_the_items_before_it() -> None:
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise LookupError("chunk 3 could not be read")

    reader = read_ahead(source(), 4)
    assert next(reader) == 1
    assert next(reader) == 2
    with pytest.raises(LookupError, match="chunk 3"):
        next(reader)


def test_a_consumer_that_stops_early_leaves_the_source_closed() -> None:
    closed = threading.Event()

    def source() -> Iterator[int]:
        try:
            yield from range(1_000_000)
        finally:
            closed.set()

    reader = read_ahead(source(), 2)
    assert [next(reader) for _ in range(3)] == [0, 1, 2]
    reader.close()
    assert closed.is_set()  # closed when the generator returned: what the source reads from may be closed now


def test_depth_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="above 0"):
        next(read_ahead(iter([1]), 0))


def test_weighed_items_run_ahead_while_those_ready_weigh_at_most_depth() -> None:
    produced: list[int] = []
    # items 0-3 weigh 1/4 (a table read four chunks at a time), the rest 1/2
    reader = read_ahead(counted(produced), 1, weight=lambda i: Fraction(1, 4 if i < 4 else 2))
    assert next(reader) == 0
    # 0 taken; 1, 2, 3 ready (3/4); 4 (1/2) produced and waiting: 3/4 + 1/2 is more than 1
    assert produced_after(produced, 5) == 5
    assert next(reader) == 1 and next(reader) == 2  # 3 and 4 ready now (1/4 + 1/2), 5 waiting
    assert produced_after(produced, 6) == 6
    reader.close()
