"""OpenLineage facets of the three operators, from a lake written with the real writers: the source
tables in the MySQL namespace with their column types, the lake's Delta tables with their stored
schema and the rows the run wrote."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import airflow_provider_mysqlcdc
from airflow_provider_mysqlcdc.cdc.schema.table import TableId, TableSchema
from airflow_provider_mysqlcdc.engine.options.stream_options import StreamProgress, StreamSummary
from airflow_provider_mysqlcdc.lake import changelog_uri, table_uri
from airflow_provider_mysqlcdc.lake.changelog import changes_table
from airflow_provider_mysqlcdc.lake.documents.checkpoint import Checkpoint
from airflow_provider_mysqlcdc.lake.documents.snapshot import BatchManifest
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.operators.lineage import (
    LineageFacts,
    gather,
    operator_lineage,
    split_facts,
    stream_facts,
)
from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator
from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator
from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator
from tests.lakes import ORDERS, SCHEMA, Lakes, committed_batch, insert, off, transaction, update

SOURCE = "mysql://db.example.com:3307"
METADATA = ["_op", "_database", "_table", "_op_ts", "_binlog_file", "_binlog_pos", "_row_seq"]


@pytest.fixture
def emitting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The openlineage provider configured to emit (without a transport it is disabled, and the
    operators gather nothing); the provider caches its configuration except under pytest."""
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "console")


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lakes:
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", json.dumps({
        "conn_type": "mysql_cdc", "host": "db.example.com", "port": 3307, "login": "cdc", "password": "secret",
    }))
    return Lakes(str(tmp_path / "lake"), monkeypatch)


def fields(dataset: Any) -> list[tuple[str, str]]:
    return [(f.name, f.type) for f in dataset.facets["schema"].fields]


@pytest.mark.usefixtures("emitting")
def test_a_snapshot_batch_reads_its_source_table_and_writes_the_current_state(lake: Lakes) -> None:
    manifest: BatchManifest = committed_batch(lake, [(1, "a", 1), (2, "b", 2)], off(2, 4711))
    operator = MySqlSnapshotSparkOperator(task_id="snapshot", batch=manifest.batch.to_dict(), base_uri=lake.base_uri,
                                          mysql_cdc_conn_id="cdc_source")
    # what execute() does once the batch is in the lake: gathers the facts
    operator._committed({}, Lake.at(lake.base_uri), [manifest])

    lineage = operator.get_openlineage_facets_on_complete(task_instance=None)

    (source,) = lineage.inputs
    assert (source.namespace, source.name) == (SOURCE, "shop.orders")
    assert fields(source) == [("id", "int(11)"), ("name", "varchar(20)"), ("qty", "int(11)")]
    (output,) = lineage.outputs
    assert (output.namespace, output.name) == ("file", table_uri(lake.base_uri, "shop.orders"))
    stored = [name for name, _ in fields(output)]
    assert stored[:3] == ["id", "name", "qty"] and set(METADATA) <= set(stored) and "_batch" in stored
    assert dict(fields(output))["id"] == "int32"
    statistics = output.outputFacets["outputStatistics"]
    assert (statistics.rowCount, statistics.size) == (2, manifest.bytes)
    assert "secret" not in repr(lineage)


def test_operators_that_did_not_run_report_no_datasets(lake: Lakes) -> None:
    split = MySqlChunkSplitOperator(task_id="split", base_uri=lake.base_uri, tables=["shop.orders"],
                                    mysql_cdc_conn_id="cdc_source")
    stream = MySqlBinlogStreamOperator(task_id="stream", base_uri=lake.base_uri, tables=["shop.orders"],
                                       mysql_cdc_conn_id="cdc_source")
    snapshot = MySqlSnapshotSparkOperator(task_id="snapshot", batch={}, base_uri=lake.base_uri)
    for operator in (split, stream, snapshot):
        lineage = operator.get_openlineage_facets_on_complete(task_instance=None)
        assert (lineage.inputs, lineage.outputs) == ([], [])


def test_the_split_reads_the_planned_tables_with_their_columns(lake: Lakes) -> None:
    lake.plan([])
    lineage = operator_lineage(split_facts("cdc_source", Lake.at(lake.base_uri), [ORDERS]))
    (source,) = lineage.inputs
    assert (source.namespace, source.name) == (SOURCE, "shop.orders")
    assert fields(source)[0] == ("id", "int(11)")
    assert lineage.outputs == []
    assert operator_lineage(split_facts("cdc_source", Lake.at(lake.base_uri), [])).inputs == []


def test_the_stream_writes_each_changelog_with_the_rows_of_its_own_batches(lake: Lakes) -> None:
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((1, "a", 1)))))  # an earlier task
    lake.commit_stream(2, off(1, 800), (SCHEMA, transaction(1, 700, *update((1, "a", 1), (1, "a", 5)))))
    lake.commit_stream(3, off(1, 900), (SCHEMA, transaction(1, 800, insert((2, "b", 2)))))
    summary = StreamSummary(StreamProgress(0.0, 0.0, batches=2, rows=3), "idle for 1 s", "x", seq=3)

    lineage = operator_lineage(stream_facts("cdc_source", Lake.at(lake.base_uri), summary))

    (source,) = lineage.inputs
    assert (source.namespace, source.name) == (SOURCE, "shop.orders")
    changelog, current = lineage.outputs
    assert (changelog.namespace, changelog.name) == ("file", changelog_uri(lake.base_uri, "shop.orders"))
    assert changelog.outputFacets["outputStatistics"].rowCount == 3  # batches 2 and 3: an update's two rows, an insert
    assert "_stream_seq" in dict(fields(changelog))
    assert current.name == table_uri(lake.base_uri, "shop.orders")
    assert current.facets == {} and current.outputFacets == {}  # no snapshot, no MERGE yet: no table, nothing counted


def test_a_changelog_no_batch_of_the_task_wrote_counts_no_rows(lake: Lakes) -> None:
    """Of a whole database's tables, those the task's batches did not write count 0 (its checkpoint's
    ``touched``); those they did, their rows, as before."""
    items = TableSchema(TableId("shop", "items"), SCHEMA.columns, SCHEMA.primary_key)
    checkpoint = Checkpoint(seq=1, offset=off(1, 700), schemas={ORDERS: SCHEMA, items.id: items})
    lake.stream.commit(checkpoint, {ORDERS: [changes_table(transaction(1, 600, insert((1, "a", 1))), SCHEMA)],
                                    items.id: [changes_table(transaction(1, 600, insert((7, "i", 1))), items)]})
    checkpoint.seq, checkpoint.offset = 2, off(1, 800)  # this task's one batch: orders only
    lake.stream.commit(checkpoint, {ORDERS: [changes_table(transaction(1, 700, insert((2, "b", 2))), SCHEMA)]})
    summary = StreamSummary(StreamProgress(0.0, 0.0, batches=1, rows=1), "idle for 1 s", "x", seq=2)

    lineage = operator_lineage(stream_facts("cdc_source", Lake.at(lake.base_uri), summary))

    counts = {o.name: o.outputFacets["outputStatistics"].rowCount for o in lineage.outputs if o.outputFacets}
    assert counts == {changelog_uri(lake.base_uri, "shop.items"): 0, changelog_uri(lake.base_uri, "shop.orders"): 1}
    assert "_stream_seq" in dict(fields(lineage.outputs[0]))  # the untouched changelog's columns all the same


def test_nothing_is_gathered_where_openlineage_does_not_emit(lake: Lakes) -> None:
    read: list[str] = []

    def facts(base_uri: str) -> LineageFacts:
        read.append(base_uri)
        return LineageFacts()

    assert gather(facts, lake.base_uri) is None and read == []  # no transport configured here


@pytest.mark.usefixtures("emitting")
def test_lineage_that_cannot_be_gathered_never_fails_the_task(lake: Lakes, caplog: pytest.LogCaptureFixture) -> None:
    lake.commit_stream(1, off(1, 700), (SCHEMA, transaction(1, 600, insert((1, "a", 1)))))
    summary = StreamSummary(StreamProgress(0.0, 0.0, batches=1), "idle for 1 s", "x", seq=1)
    assert gather(stream_facts, "no_such_connection", Lake.at(lake.base_uri), summary) is None
    assert "could not gather the OpenLineage facts" in caplog.text
    assert gather(stream_facts, "cdc_source", Lake.at(lake.base_uri), summary) is not None


def test_openlineage_is_imported_only_inside_the_methods_that_need_it() -> None:
    """Without the ``openlineage`` extra the package must import and run: no module of it imports
    OpenLineage at module level (outside ``if TYPE_CHECKING:``); only the methods its listener calls do."""
    package = Path(airflow_provider_mysqlcdc.__file__).parent
    offenders: list[str] = []

    class ModuleLevelImports(ast.NodeVisitor):
        def __init__(self, path: Path) -> None:
            self.path = path

        def visit_FunctionDef(self, node: ast.FunctionDef) -> None:  # noqa: N802 (ast's names)
            pass  # imported when called

        visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]  # noqa: N815

        def visit_If(self, node: ast.If) -> None:  # noqa: N802
            if ast.unparse(node.test) != "TYPE_CHECKING":
                self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:  # noqa: N802
            self.found([a.name for a in node.names])

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:  # noqa: N802
            self.found([node.module or ""])

        def found(self, names: list[str]) -> None:
            offenders.extend(f"{self.path.relative_to(package)}: {n}" for n in names if "openlineage" in n)

    for path in sorted(package.rglob("*.py")):
        ModuleLevelImports(path).visit(ast.parse(path.read_text()))
    assert offenders == []
    lineage = (package / "operators" / "lineage.py").read_text()
    assert "from airflow.providers.openlineage" in lineage  # the check looks at the right thing
