"""Verification of the replica against the source (issue 19, tests a and b), without Spark.

The replica is built by the engine's own snapshot and stream functions (``tests.replica``), the stream
keeps following the server in a worker process, and each batch is verified as its Spark job would
(``verify_batch_locally``: the same ``verify_chunks`` per part), then summarized into the run's report.

(a) Under a concurrent writer, every chunk is equal: both for a plain table and for a table of every
type of the type matrix (the same canonical values on both sides, so no false difference).
(b) After rows of the current Delta table are damaged on purpose (one deleted, one changed, one added),
verify names exactly those keys, in their chunks, and fails the run when asked to.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.engine.verification.verify import VerifyStore, summarize
from airflow_provider_mysqlcdc.exceptions import ReplicaMismatchError
from airflow_provider_mysqlcdc.lake.format.delta_schema import BATCH_COLUMN
from airflow_provider_mysqlcdc.lake.handle import Lake, table_uri
from tests import replica
from tests.airflow_connections import config_of
from tests.integration.orders import OrdersWriter, create_orders
from tests.integration.type_matrix import TypesWriter, create_types_table
from tests.replica import verify
from tests.writers import Ticker


@pytest.mark.parametrize("kind", ["orders", "types"])
def test_verify_reports_no_difference_under_concurrent_writes(mariadb_server, admin, database, tmp_path,
                                                              kind) -> None:
    config, base_uri = config_of(mariadb_server, "5620-5630"), str(tmp_path / "lake")
    if kind == "orders":
        create_orders(admin)
        writer: OrdersWriter | TypesWriter = OrdersWriter(mariadb_server, database, seconds=3_600, seed=5)
        chunk_size, chunks_per_batch = 500, 4
    else:
        create_types_table(admin)
        writer, chunk_size, chunks_per_batch = TypesWriter(mariadb_server, database, seconds=3_600, seed=5), 2, 2
    table = f"{database}.{kind}"
    writer.start()
    try:
        plan = replica.snapshot(config, base_uri, table, chunk_size=chunk_size, chunks_per_batch=chunks_per_batch)
        replica.stream(config, base_uri, [table], merge=True)
        with replica.stream_running(config, base_uri):
            report = verify(config, base_uri, plan, "run-a", fail_on_difference=True)
            count = writer.count
            time.sleep(0.5)
    finally:
        writer.until = lambda: True
        writer.join(30)
    assert writer.count > count > 5  # it wrote while the chunks were verified
    assert report.equal, report.summary()
    assert len(report.verdicts) == len(plan.chunks) >= 4 and len(plan.batches) >= 2
    assert report.rows > 0 and all(v.source_rows == v.replica_rows for v in report.verdicts)
    store = VerifyStore(Lake.at(base_uri))
    written = store.lake.read_json(store.report_path(TableId.parse(table), "run-a"))
    assert written is not None and written["equal"] and written["chunks"] == len(plan.chunks)


def damage(base_uri: str, table: str, last_batch: int) -> None:
    """Delete key 17, change key 1234's note, and add keys 70001 and 70002 (copies of key 1235's row): the
    first in the partition of the last batch, whose key range holds it, the second misplaced in batch 0's."""
    current = DeltaTable(table_uri(base_uri, table))
    current.delete("id = 17")
    current.update(updates={"note": "'damaged'"}, predicate="id = 1234")
    copy = current.to_pyarrow_table(filters=[("id", "=", 1235)])
    for key, batch in ((70_001, last_batch), (70_002, 0)):
        rows = copy
        for name, value in (("id", key), (BATCH_COLUMN, batch)):
            index = rows.schema.get_field_index(name)
            rows = rows.set_column(index, name, pa.array([value], rows.schema.field(name).type))
        write_deltalake(table_uri(base_uri, table), rows, mode="append")


def test_verify_names_exactly_the_damaged_keys(mariadb_server, admin, database, tmp_path) -> None:
    create_orders(admin)
    config, base_uri = config_of(mariadb_server, "5640-5650"), str(tmp_path / "lake")
    table = f"{database}.orders"
    plan = replica.snapshot(config, base_uri, table, chunk_size=500, chunks_per_batch=4)
    with admin.cursor() as cur:  # a few changes the stream writes to the changelog, one of them to key 1234
        cur.execute("UPDATE orders SET customer = 5 WHERE id IN (1234, 4000)")
        cur.execute("DELETE FROM orders WHERE id = 4001")
    replica.stream(config, base_uri, [table], merge=True)
    damage(base_uri, table, plan.batches[-1].number)

    ticker = Ticker(mariadb_server, database)
    ticker.start()
    try:
        with replica.stream_running(config, base_uri):
            report = verify(config, base_uri, plan, "run-b")
            with pytest.raises(ReplicaMismatchError, match="3 chunks differ .* 1 keys missing .* 2 extra, 1 with"):
                summarize(Lake.at(base_uri), plan.schema.id, "run-b", [b.number for b in plan.batches], True)
    finally:
        ticker.stopping.set()
        ticker.join(10)

    assert report.totals() == {"missing": 1, "extra": 2, "different": 1}
    by_chunk = {v.chunk.index: v for v in report.differing}
    chunk_of = {key: next(c.index for c in plan.chunks if (c.start is None or c.start <= key)
                          and (c.end is None or key < c.end)) for key in (17, 1234, 70_001)}
    assert set(by_chunk) == set(chunk_of.values())
    assert by_chunk[chunk_of[17]].missing.keys == ((17,),)
    assert by_chunk[chunk_of[1234]].different.keys == ((1234,),)
    assert by_chunk[chunk_of[70_001]].extra.keys == ((70_001,), (70_002,))
    # and the source side of each is what the server holds
    assert sum(v.source_rows for v in report.verdicts) == 5_999
    current = DeltaTable(table_uri(base_uri, table)).to_pyarrow_table(filters=[("id", "=", 1234)])
    assert pc.equal(current.column("note"), "damaged").to_pylist() == [True]


def test_the_verify_dag_on_spark_reports_and_fails_on_a_damaged_row(airflow_db, mariadb_server, admin, database,
                                                                   tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example verify DAG as a user runs it: plan, spark-submit (local[2], two tasks) of a job holding
    both batches, summary. The replica is equal but for one changed row: the verify task succeeds, the
    summary fails, and the report in the lake and in XCom names that key."""
    from dev.dag_file import load_dag
    from tests.airflow_connections import set_airflow_connections

    set_airflow_connections(monkeypatch, mariadb_server, "5660-5670")
    create_orders(admin)
    config, base_uri = config_of(mariadb_server, "5680-5690"), str(tmp_path / "lake")
    table = f"{database}.orders"
    plan = replica.snapshot(config, base_uri, table, chunk_size=1_000, chunks_per_batch=3)
    replica.stream(config, base_uri, [table], merge=True)
    DeltaTable(table_uri(base_uri, table)).update(updates={"amount": "amount + 1"}, predicate="id = 4321")

    ticker = Ticker(mariadb_server, database)
    ticker.start()
    try:
        with replica.stream_running(config, base_uri):
            run = load_dag("mysql_cdc_verify").test(run_conf={"tables": [table], "base_uri": base_uri,
                                                              "wait_seconds": 120})
    finally:
        ticker.stopping.set()
        ticker.join(10)

    assert len(plan.batches) == 2
    states = {(ti.task_id, ti.rendered_map_index): ti.state for ti in run.get_task_instances()}
    job = f"{plan.schema.id}: 2 batches, {len(plan.chunks)} chunks"  # both batches in one job
    assert states == {("plan", None): "success", ("verify", job): "success", ("summary", None): "failed",
                      ("repair", None): "upstream_failed"}
    assert run.state == "failed"
    store = VerifyStore(Lake.at(base_uri))
    report = store.lake.read_json(store.report_path(plan.schema.id, run.run_id))
    assert report is not None and report["chunks"] == len(plan.chunks) and report["rows"] == 6_000
    assert (report["missing"], report["extra"], report["different"]) == (0, 0, 1)
    (differing,) = [v for v in report["verdicts"] if not v["equal"]]
    assert differing["different"]["keys"] == [[4321]]
    (verified,) = [ti for ti in run.get_task_instances() if ti.task_id == "verify"]
    xcom = verified.xcom_pull(task_ids="verify", map_indexes=verified.map_index)
    assert sorted(r["different"] for r in xcom["reports"]) == [0, 1]

    # the same DAG with repair: the summary reports instead of failing, the repair task reads the differing
    # chunk again and fixes the row in the lake, while the stream runs
    ticker = Ticker(mariadb_server, database)
    ticker.start()
    try:
        with replica.stream_running(config, base_uri):
            repaired = load_dag("mysql_cdc_verify").test(run_conf={"tables": [table], "base_uri": base_uri,
                                                                   "wait_seconds": 120, "repair": True})
    finally:
        ticker.stopping.set()
        ticker.join(10)
    assert repaired.state == "success"
    (repair_ti,) = [ti for ti in repaired.get_task_instances() if ti.task_id == "repair"]
    (done,) = repair_ti.xcom_pull(task_ids="repair")
    assert [c["chunk"] for c in done["chunks"]] == [differing["chunk"]["i"]]
    assert (done["rows_updated"], done["rows_inserted"], done["rows_deleted"]) == (1, 0, 0)
    with admin.cursor() as cur:
        cur.execute("SELECT amount FROM orders WHERE id = 4321")
        (amount,) = cur.fetchone()
    current = DeltaTable(table_uri(base_uri, table)).to_pyarrow_table(filters=[("id", "=", 4321)])
    assert current.column("amount").to_pylist() == [amount]
