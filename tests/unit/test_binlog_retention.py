"""The binlog retention guard's pure logic: which server variable decides the retention, the snapshot's
estimated duration (default or measured rate, rows per chunk, Spark start, earlier batches' age), and
the decision: nothing, a warning, or a BinlogRetentionError that says what to set."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.cdc.source.retention import (
    BATCH_OVERHEAD_SECONDS,
    DEFAULT_ROWS_PER_SECOND,
    BinlogRetention,
    RetentionCheck,
    SnapshotEstimate,
    TableWork,
    check_retention,
    duration,
    estimate_snapshot,
    retention_from_variables,
)
from airflow_provider_mysqlcdc.exceptions import BinlogRetentionError, InvalidOptionError, SourceConfigError

ORDERS = TableId("shop", "orders")


@pytest.mark.parametrize(
    ("variables", "seconds", "setting"),
    [
        # MariaDB 10.6+: the two move together
        ({"binlog_expire_logs_seconds": "86400", "expire_logs_days": "1.000000"}, 86_400, "binlog_expire_logs_seconds"),
        ({"binlog_expire_logs_seconds": "0", "expire_logs_days": "0.000000"}, None, "binlog_expire_logs_seconds"),
        # MySQL 8.0: expire_logs_days applies only while binlog_expire_logs_seconds is 0
        ({"binlog_expire_logs_seconds": "0", "expire_logs_days": "3"}, 3 * 86_400, "expire_logs_days"),
        ({"binlog_expire_logs_seconds": "2592000", "expire_logs_days": "0",
          "binlog_expire_logs_auto_purge": "ON"}, 2_592_000, "binlog_expire_logs_seconds"),
        # MySQL 8.0.29+: auto purge off means never purged by age
        ({"binlog_expire_logs_seconds": "3600", "binlog_expire_logs_auto_purge": "OFF"}, None,
         "binlog_expire_logs_auto_purge"),
        # MySQL 8.4: no expire_logs_days
        ({"binlog_expire_logs_seconds": "600"}, 600, "binlog_expire_logs_seconds"),
        # MariaDB < 10.6, MySQL 5.7
        ({"expire_logs_days": "7"}, 7 * 86_400, "expire_logs_days"),
        ({"expire_logs_days": "0"}, None, "expire_logs_days"),
        ({}, None, "expire_logs_days"),
    ],
)
def test_the_retention_in_effect(variables: dict[str, str], seconds: float | None, setting: str) -> None:
    retention = retention_from_variables(variables)
    assert (retention.seconds, retention.setting, retention.size_limit) == (seconds, setting, 0)


def test_size_limits_are_found() -> None:
    retention = retention_from_variables({"binlog_expire_logs_seconds": "0", "max_binlog_total_size": "1073741824",
                                          "binlog_space_limit": "1073741824"})
    assert (retention.seconds, retention.size_setting, retention.size_limit) == (None, "max_binlog_total_size", 2**30)
    assert retention_from_variables({"binlog_space_limit": "5"}).size_setting == "binlog_space_limit"


def test_retention_check_parses_its_values_and_names_them_when_wrong() -> None:
    assert RetentionCheck.parse(" WARN ") is RetentionCheck.WARN
    assert RetentionCheck.parse(RetentionCheck.OFF) is RetentionCheck.OFF
    assert RetentionCheck.parse("error") is RetentionCheck.ERROR
    # Airflow renders a templated argument with str(): the default must survive it
    assert all(RetentionCheck.parse(str(m)) is m and f"{m}" == m.value for m in RetentionCheck)
    with pytest.raises(InvalidOptionError, match="retention_check must be one of 'error', 'warn', 'off', not 'no'"):
        RetentionCheck.parse("no")


def test_default_rate_with_chunk_size_rows_per_chunk_and_spark_start_per_batch() -> None:
    work = [TableWork(ORDERS, planned_chunks=100, pending_batches=4, pending_chunks=100, approximate_rows=500_000)]
    estimate = estimate_snapshot(work, chunk_size=8_000)
    assert estimate.rows == 800_000  # chunk_size beats 500,000 / 100 chunks: the estimate errs high
    assert estimate.seconds == pytest.approx(800_000 / DEFAULT_ROWS_PER_SECOND + 4 * BATCH_OVERHEAD_SECONDS)
    assert estimate.measured_batches == 0 and "the default 50,000 rows/s" in estimate.describe()
    assert "one job at a time" in estimate.describe()
    # the server's estimate wins when chunks hold more rows than chunk_size
    big = [TableWork(ORDERS, planned_chunks=10, pending_batches=1, pending_chunks=5, approximate_rows=1_000_000)]
    assert estimate_snapshot(big, chunk_size=8_000).rows == 500_000
    # parallelism divides the whole
    assert estimate_snapshot(work, 8_000, parallelism=2).seconds == pytest.approx(estimate.seconds / 2)


def test_committed_batches_give_the_rate_and_rows_per_chunk_once_large_enough() -> None:
    done = TableWork(ORDERS, planned_chunks=20, pending_batches=2, pending_chunks=10, committed_batches=2,
                     committed_rows=1_000_000, committed_chunks=10, committed_seconds=4.0)
    estimate = estimate_snapshot([done], chunk_size=8_000)
    assert (estimate.rows_per_second, estimate.rows, estimate.measured_batches) == (250_000, 1_000_000, 2)
    assert estimate.seconds == pytest.approx(4.0 + 2 * BATCH_OVERHEAD_SECONDS)
    assert "250,000 rows/s measured over 2 committed batches" in estimate.describe()
    # a finished table's batches measure the rate for another table's pending ones
    other = TableWork(TableId("shop", "items"), planned_chunks=3, pending_batches=1, pending_chunks=3)
    finished = TableWork(ORDERS, 20, 0, 0, committed_batches=3, committed_rows=600_000, committed_chunks=20,
                         committed_seconds=2.0)
    assert estimate_snapshot([finished, other], 8_000).rows_per_second == 300_000
    # too few rows measured (per-batch costs dominate small batches): the default rate
    small = TableWork(ORDERS, 20, 1, 1, committed_batches=1, committed_rows=500, committed_chunks=1,
                      committed_seconds=2.0)
    assert estimate_snapshot([small], 8_000).rows_per_second == DEFAULT_ROWS_PER_SECOND


def test_earlier_batches_age_counts_for_tables_still_pending_only() -> None:
    pending = TableWork(ORDERS, 10, 1, 5, committed_batches=1, committed_rows=5, committed_chunks=5,
                        committed_seconds=1.0, oldest_commit_age_seconds=7_200)
    finished = TableWork(TableId("shop", "old"), 10, 0, 0, committed_batches=2, oldest_commit_age_seconds=999_999)
    estimate = estimate_snapshot([pending, finished], 8_000)
    assert estimate.backlog_seconds == 7_200 and estimate.seconds > 7_200
    assert "since the first batches of these tables committed" in estimate.describe()


def _estimate(seconds: float) -> SnapshotEstimate:
    """Work that takes ``seconds`` at the default rate: whole batches of Spark start, no rows."""
    batches = seconds / BATCH_OVERHEAD_SECONDS
    assert batches == int(batches)
    return estimate_snapshot([TableWork(ORDERS, 1, int(batches), 0)], chunk_size=1, default_rows_per_second=1e12)


def test_within_half_the_retention_nothing_is_said() -> None:
    retention = BinlogRetention(3600.0, "binlog_expire_logs_seconds", "3600")
    assert check_retention(_estimate(1800), retention, RetentionCheck.ERROR) == []
    never = BinlogRetention(None, "binlog_expire_logs_seconds", "0")
    assert check_retention(_estimate(900_000), never, RetentionCheck.ERROR) == []


def test_above_half_the_retention_warns_naming_setting_estimate_and_retention() -> None:
    retention = BinlogRetention(3600.0, "binlog_expire_logs_seconds", "3600")
    (warning,) = check_retention(_estimate(2400), retention, RetentionCheck.ERROR)
    assert "binlog_expire_logs_seconds = 3600 (1 h)" in warning and "about 40 min from now" in warning
    assert "more than 50% of it" in warning and "Raise binlog_expire_logs_seconds to at least 4800" in warning


def test_beyond_the_retention_refuses_with_what_to_set() -> None:
    retention = BinlogRetention(3600.0, "binlog_expire_logs_seconds", "3600")
    with pytest.raises(BinlogRetentionError) as error:
        check_retention(_estimate(4500), retention, RetentionCheck.ERROR)
    message = str(error.value)
    assert isinstance(error.value, SourceConfigError)
    assert "about 1 h 15 min from now" in message and "binlog_expire_logs_seconds = 3600 (1 h)" in message
    assert "SET GLOBAL binlog_expire_logs_seconds = 9000" in message and "fewer tables per run" in message
    assert "retention_check='warn'" in message
    # opted out: a warning, and the snapshot goes on
    (warning,) = check_retention(_estimate(4500), retention, RetentionCheck.WARN)
    assert "may be purged before it starts" in warning and "retention_check='warn'" in warning
    assert check_retention(_estimate(4500), retention, RetentionCheck.OFF) == []


def test_days_only_servers_are_told_days() -> None:
    retention = retention_from_variables({"expire_logs_days": "1"})
    with pytest.raises(BinlogRetentionError, match=r"SET GLOBAL expire_logs_days = 3\b"):
        check_retention(_estimate(90_000), retention, RetentionCheck.ERROR)
    # MySQL 8.0 falling back to expire_logs_days: binlog_expire_logs_seconds takes over when set
    mysql8 = retention_from_variables({"binlog_expire_logs_seconds": "0", "expire_logs_days": "1"})
    with pytest.raises(BinlogRetentionError, match="expire_logs_days = 1 .*SET GLOBAL binlog_expire_logs_seconds"):
        check_retention(_estimate(90_000), mysql8, RetentionCheck.ERROR)


def test_a_size_limit_is_always_a_warning() -> None:
    retention = retention_from_variables({"binlog_expire_logs_seconds": "0", "max_binlog_total_size": "1000000"})
    (warning,) = check_retention(_estimate(60), retention, RetentionCheck.ERROR)
    assert "max_binlog_total_size = 1,000,000 bytes" in warning
    assert check_retention(_estimate(60), retention, RetentionCheck.OFF) == []


def test_nothing_to_snapshot_nothing_to_check() -> None:
    retention = BinlogRetention(1.0, "binlog_expire_logs_seconds", "1")
    estimate = estimate_snapshot([TableWork(ORDERS, 10, 0, 0, oldest_commit_age_seconds=50)], 8_000)
    assert check_retention(estimate, retention, RetentionCheck.ERROR) == []


@pytest.mark.parametrize(("seconds", "text"), [(0, "0 s"), (59.6, "1 min"), (125, "2 min 5 s"), (3600, "1 h"),
                                               (4500, "1 h 15 min"), (86_400 * 2 + 3600 * 4, "2 d 4 h")])
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text
