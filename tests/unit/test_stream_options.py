"""The stream's options from rendered template values: text or native, each bad value named."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_mysqlcdc.cdc.offset.startup import StartupMode
from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.engine.options.stream_options import (
    CommitLimits,
    PositionLostBehavior,
    StreamOptions,
    StreamProgress,
    StreamSummary,
)
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError
from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator


def options(**given: Any) -> StreamOptions:
    """The options as the operator builds them, from its defaults and ``given``."""
    operator = MySqlBinlogStreamOperator(task_id="s", **{"base_uri": "/lake", "tables": ["shop.a"], **given})
    return operator._options({})


def test_operator_defaults_are_the_options_defaults() -> None:
    writer = options().writer
    assert options() == StreamOptions("/lake", (TableId("shop", "a"),), writer=writer)
    assert options().limits == CommitLimits()


def test_rendered_text_becomes_typed_values() -> None:
    got = options(tables="['shop.a', 'shop.b']", stop_after_idle_seconds="4", max_duration_seconds="None",
                  defer_after_idle_seconds="0", startup_mode="latest-offset", merge_interval_seconds="30")
    assert got.tables == (TableId("shop", "a"), TableId("shop", "b"))
    assert (got.stop_after_idle_seconds, got.max_duration_seconds, got.defer_after_idle_seconds) == (4.0, None, 0.0)
    assert got.startup_mode is StartupMode.LATEST
    assert got.merge_interval_seconds == 30.0
    assert options(tables="shop.a, shop.b").tables == got.tables
    archived = options(on_position_lost=" Archive ", binlog_archive_uri="s3://backups/binlog/")
    assert (archived.on_position_lost, archived.binlog_archive_uri) == (PositionLostBehavior.ARCHIVE,
                                                                        "s3://backups/binlog/")
    assert options().on_position_lost is PositionLostBehavior.FAIL


@pytest.mark.parametrize(("given", "message"), [
    ({"startup_mode": "sometime"}, "startup_mode must be one of"),
    ({"tables": []}, r"set tables=\['db.table', ...\] or include_databases"),
    ({"tables": None, "include_databases": "("}, r"include_databases '\(' is not a valid regular expression"),
    ({"tables": ["shop.a", "shop.a"]}, "tables names a table twice"),
    ({"tables": ["orders"]}, "must be written as 'database.table'"),
    ({"stop_after_idle_seconds": "soon"}, "stop_after_idle_seconds must be a number of seconds"),
    ({"max_duration_seconds": -1}, "max_duration_seconds must be >= 0"),
    ({"max_batch_events": 0}, "max_batch_events must be > 0"),
    ({"max_batch_bytes": "lots"}, "max_batch_bytes must be a number"),
    ({"poll_interval": 0}, "poll_interval must be > 0"),
    ({"merge_interval_seconds": 0}, "merge_interval_seconds must be > 0"),
    ({"merge_interval_seconds": "hourly"}, "merge_interval_seconds must be a number"),
    ({"schema_check_seconds": 0}, "schema_check_seconds must be > 0 .the self-check cannot be turned off"),
    ({"schema_check_seconds": "often"}, "schema_check_seconds must be a number"),
    ({"stop_at_offset": "later"}, "stop_at_offset must be 'binlog-file:position'"),
    ({"on_position_lost": "retry"}, "on_position_lost must be one of 'fail', 'resnapshot', 'archive'"),
    ({"on_position_lost": "archive"}, "on_position_lost is 'archive', but binlog_archive_uri is not set"),
])
def test_bad_values_say_what_to_set(given: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        options(**given)


def test_progress_travels_through_an_event() -> None:
    progress = StreamProgress(started=1.0, idle_since=2.0, batches=3, rows=4, deferrals=5, merged_at=6.0)
    assert StreamProgress.from_dict({**progress.to_dict(), "reason": "moved"}) == progress
    # a trigger deferred before merged_at existed: the next MERGE is due an interval after the start
    old = {k: v for k, v in progress.to_dict().items() if k != "merged_at"}
    assert StreamProgress.from_dict(old).merge_due_at(300.0) == 301.0
    assert progress.merge_due_at(300.0) == 306.0


def test_the_summary_reads_as_a_sentence_and_its_xcom_has_no_epoch_floats() -> None:
    # 2026-11-25 10:00:00 UTC
    summary = StreamSummary(StreamProgress(started=1795600800.0, idle_since=1795600860.0, batches=1, rows=2_500,
                                           deferrals=2), "idle for 5 s", "mysql-bin.000002:4", seq=7)
    text = summary.describe()
    assert text.startswith("The stream stops (idle for 5 s) after ") and text.endswith(
        ": 1 batch committed, 2,500 change rows written, 2 deferrals; the checkpoint is batch 7 at mysql-bin.000002:4.")
    xcom = summary.to_dict()
    assert xcom["started"] == "2026-11-25T10:00:00+00:00" and xcom["ended"].endswith("+00:00")
    assert not any(isinstance(v, float) for v in xcom.values())
    assert {k: xcom[k] for k in ("batches", "rows", "deferrals", "stopped", "offset", "seq")} == {
        "batches": 1, "rows": 2_500, "deferrals": 2, "stopped": "idle for 5 s", "offset": "mysql-bin.000002:4",
        "seq": 7}


def test_schema_change_behavior_is_one_of_flinks_names() -> None:
    from airflow_provider_mysqlcdc.engine.options.stream_options import SchemaChangeBehavior

    assert SchemaChangeBehavior.parse(" Try_Evolve ") is SchemaChangeBehavior.TRY_EVOLVE
    with pytest.raises(InvalidOptionError, match="must be one of 'evolve', 'try_evolve'"):
        SchemaChangeBehavior.parse("evolv")
    assert SchemaChangeBehavior.parse("IGNORE") is SchemaChangeBehavior.IGNORE
