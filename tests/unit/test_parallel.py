"""``lake.parallel.each``: results in the items' order, the first error raised after all are done."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_provider_mysqlcdc.lake.parallel import each


def test_results_keep_the_items_order_and_run_at_once() -> None:
    threads: set[str] = set()

    def slow_square(n: int) -> int:
        threads.add(threading.current_thread().name)
        time.sleep(0.01 * (5 - n))  # the first items finish last
        return n * n

    assert each(slow_square, [0, 1, 2, 3, 4], threads=5, name="t") == [0, 1, 4, 9, 16]
    assert len(threads) > 1 and all(t.startswith("t") for t in threads)


def test_the_first_error_is_raised_once_every_item_is_done() -> None:
    done: list[int] = []

    def work(n: int) -> int:
        time.sleep(0.02 if n == 3 else 0)
        if n in (1, 2):
            raise ValueError(f"item {n}")
        done.append(n)
        return n

    with pytest.raises(ValueError, match="item 1"):
        each(work, [0, 1, 2, 3], threads=4)
    assert sorted(done) == [0, 3]  # the slow item finished before the error came out


def test_one_thread_runs_in_the_callers_thread() -> None:
    assert each(lambda _: threading.current_thread() is threading.main_thread(), [1, 2], threads=1) == [True, True]
