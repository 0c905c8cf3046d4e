"""The deferrable binlog stream: write change batches while there are events, wait in the triggerer
while there are none, and stop when the configured condition says so."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator


class MySqlBinlogStreamOperator(BaseOperator):
    """Streams the binlog of ``tables`` into the lake, continuing from the lake's checkpoint.

    The first run starts according to ``startup_mode`` (like Flink CDC's ``scan.startup.mode``):
    ``initial`` from the snapshot's lowest high watermark with the per-chunk emit filter (the
    snapshot of every table must be committed), ``snapshot`` not at all, ``latest-offset`` at the
    server's current offset, ``earliest-offset`` at its first binlog, ``specific-offset`` at
    ``startup_offset`` (``"mysql-bin.000003:4"``, or the GTIDs already captured: a MySQL GTID set,
    a MariaDB GTID position), ``timestamp`` at the first transaction committed at or after
    ``startup_timestamp`` (epoch ms or ISO 8601). Later runs, retries and cleared tasks continue from
    the checkpoint, which is committed with each batch: nothing is lost or written twice.

    When caught up it polls the binlog every ``poll_interval`` seconds in the worker; once idle for
    ``defer_after_idle_seconds`` it defers to ``MySqlBinlogTrigger`` (with ``deferrable=False`` it
    keeps polling) until the binlog moves. It stops after ``stop_after_idle_seconds`` without a
    captured change, after ``max_duration_seconds``, or at ``stop_at_offset``; with none of them it
    runs forever (for ``@continuous`` DAGs). Set ``retries``: Airflow 3.3 can fail a task that
    defers often, and a retry simply continues from the checkpoint.
    """

    template_fields: Sequence[str] = (
        "base_uri", "tables", "startup_mode", "startup_offset", "startup_timestamp", "stop_after_idle_seconds",
        "max_duration_seconds", "stop_at_offset", "mysql_cdc_conn_id", "defer_after_idle_seconds",
    )

    def __init__(
        self,
        *,
        base_uri: str,
        tables: Sequence[str],
        startup_mode: str = "initial",
        startup_offset: str | None = None,
        startup_timestamp: Any = None,
        stop_after_idle_seconds: float | None = None,
        max_duration_seconds: float | None = None,
        stop_at_offset: str | None = None,
        max_batch_events: int = 100_000,
        max_batch_seconds: float = 10.0,
        max_batch_bytes: int = 64 * 1024 * 1024,
        poll_interval: float = 1.0,
        defer_after_idle_seconds: float = 60.0,
        mysql_cdc_conn_id: str = "mysql_cdc_default",
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.base_uri = base_uri
        self.tables = tables
        self.startup_mode = startup_mode
        self.startup_offset = startup_offset
        self.startup_timestamp = startup_timestamp
        self.stop_after_idle_seconds = stop_after_idle_seconds
        self.max_duration_seconds = max_duration_seconds
        self.stop_at_offset = stop_at_offset
        self.max_batch_events = max_batch_events
        self.max_batch_seconds = max_batch_seconds
        self.max_batch_bytes = max_batch_bytes
        self.poll_interval = poll_interval
        self.defer_after_idle_seconds = defer_after_idle_seconds
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.deferrable = deferrable

    def execute(self, context: Any) -> dict[str, Any] | None:
        from airflow_provider_mysqlcdc.engine.stream_runner import StartupMode, StreamProgress

        if self._options().startup_mode is StartupMode.SNAPSHOT:
            self.log.info("startup_mode 'snapshot': no binlog stream")
            return None
        return self._stream(StreamProgress.start())

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any] | None:
        from airflow_provider_mysqlcdc.engine.stream_runner import StreamProgress
        from airflow_provider_mysqlcdc.exceptions import error_from_event

        if event.get("reason") == "error":
            raise error_from_event(event)
        return self._stream(StreamProgress.from_dict(event))

    def _options(self) -> Any:
        from airflow_provider_mysqlcdc.engine.stream_runner import StreamOptions

        return StreamOptions.from_values(
            base_uri=self.base_uri, tables=self.tables, startup_mode=self.startup_mode,
            startup_offset=self.startup_offset, startup_timestamp=self.startup_timestamp,
            stop_after_idle_seconds=self.stop_after_idle_seconds, max_duration_seconds=self.max_duration_seconds,
            stop_at_offset=self.stop_at_offset, max_batch_events=self.max_batch_events,
            max_batch_seconds=self.max_batch_seconds, max_batch_bytes=self.max_batch_bytes,
            poll_interval=self.poll_interval, defer_after_idle_seconds=self.defer_after_idle_seconds,
        )

    def _stream(self, progress: Any) -> dict[str, Any] | None:
        from airflow_provider_mysqlcdc.engine.stream_runner import StreamRunner
        from airflow_provider_mysqlcdc.hooks.mysql_cdc import MySqlCdcHook
        from airflow_provider_mysqlcdc.triggers.binlog import MySqlBinlogTrigger

        config = MySqlCdcHook(self.mysql_cdc_conn_id).get_config()
        runner = StreamRunner(self._options(), config)
        control = config.connect()
        try:
            checkpoint = runner.open(control)
            # a resume from the triggerer costs seconds (and Airflow 3.3 races on quick resumes): the
            # runner polls here until idle for defer_after_idle_seconds, then the triggerer waits
            stopped = runner.run(control, checkpoint, progress, may_wait=bool(self.deferrable))
        finally:
            control.close()
        if stopped:
            return runner.summary(progress, checkpoint, stopped)
        progress.deferrals += 1
        self.defer(
            trigger=MySqlBinlogTrigger(self.mysql_cdc_conn_id, checkpoint.offset.to_dict(), runner.wake_at(progress),
                                       runner.options.poll_interval, progress.to_dict()),
            method_name="execute_complete",
        )
