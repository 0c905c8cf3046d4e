"""What Airflow knows of a DAG's MySQL CDC work: which lakes a run writes, which tables it touches, and
the states of its snapshot batches and streams, read from the metadata database of the api-server.

A lake is found where the run's tasks rendered it: every operator of this package has the template
fields ``base_uri`` and ``lake_conn_id``, and Airflow keeps each task instance's rendered fields
(``RenderedTaskInstanceFields``) once it started. A snapshot task's rendered ``batch`` (its job's
batches, ``Job``, of one or many tables) names the tables and numbers of the batches it writes,
so a batch without a manifest yet is ``running`` or ``failed`` as its task instance is. The stream's
task instance gives the stream's state (running, deferred, failed...). The tables of a run are those its tasks rendered
(``tables`` lists, batches; all of its lakes' when a task chose its tables by patterns); a task
instance's, those of that task alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_provider_mysqlcdc.cdc.schema.table import TableId
from airflow_provider_mysqlcdc.engine.options import rendered
from airflow_provider_mysqlcdc.engine.snapshot.jobs import Job
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError, SnapshotStateError

OPERATORS = (
    "MySqlChunkSplitOperator", "MySqlSnapshotSparkOperator", "MySqlBinlogStreamOperator", "MySqlVerifyPlanOperator",
    "MySqlVerifyOperator", "MySqlVerifySummaryOperator", "MySqlResnapshotOperator",
)
"""The class names of this package's operators, as task instances record them (``TaskInstance.operator``)."""
STREAM_OPERATOR = "MySqlBinlogStreamOperator"
_BATCH_STATES = {"running": "running", "failed": "failed", "upstream_failed": "failed"}
"""A snapshot task instance's state, as the state of its batches that have no manifest yet (else pending)."""


@dataclass(frozen=True)
class LakeRef:
    """A lake as the run's tasks rendered it."""

    base_uri: str
    lake_conn_id: str | None


@dataclass(frozen=True)
class TaskState:
    task_id: str
    map_index: int
    state: str | None
    try_number: int


@dataclass
class RunFacts:
    """One DAG run's MySQL CDC facts. ``tables``: the tables to show (None: every table of its lakes)."""

    dag_id: str
    run_id: str
    run_state: str | None
    lakes: list[LakeRef] = field(default_factory=list)
    tables: set[str] | None = None
    batch_states: dict[tuple[TableId, int], str] = field(default_factory=dict)
    streams: dict[LakeRef, TaskState] = field(default_factory=dict)


def _batches(value: Any) -> list[tuple[TableId, int]]:
    """A rendered ``batch`` field, a job's batches (``Job``), as its batches' tables and numbers;
    one batch's dict (a split of an earlier version) as that batch; other forms: none."""
    try:
        value = rendered.literal("batch", value)
    except InvalidOptionError:
        return []
    if not isinstance(value, Mapping):
        return []
    if "tables" in value:
        try:
            return [(b.table, b.number) for b in Job.from_dict(dict(value)).batches]
        except (SnapshotStateError, AttributeError, KeyError, TypeError, ValueError):  # not a job: none
            return []
    if "table" in value and "number" in value:
        return [(TableId.parse(str(value["table"])), int(value["number"]))]
    return []


def _tables(value: Any) -> set[str] | None:
    """A rendered ``tables`` field as names (None when it is not a list of names, e.g. not given)."""
    try:
        value = rendered.literal("tables", value)
    except InvalidOptionError:
        return None
    return {str(t) for t in value} if isinstance(value, list) and value else None


def _lake(fields: Mapping[str, Any]) -> LakeRef | None:
    base_uri = fields.get("base_uri")
    if not isinstance(base_uri, str) or rendered.is_none(base_uri) or "{{" in base_uri:
        return None
    conn = fields.get("lake_conn_id")
    return LakeRef(base_uri, None if conn is None or rendered.is_none(conn) else str(conn))


def latest_run_id(session: Session, dag_id: str) -> str | None:
    from airflow.models.dagrun import DagRun

    return session.scalar(select(DagRun.run_id).where(DagRun.dag_id == dag_id).order_by(DagRun.id.desc()).limit(1))


@dataclass(frozen=True)
class RenderedTask:
    """A task instance of the run with the fields it rendered (``state``/``operator`` None: no instance row)."""

    task_id: str
    map_index: int
    fields: Mapping[str, Any]
    state: str | None
    operator: str | None
    try_number: int = 0


def run_facts(session: Session, dag_id: str, run_id: str, task_id: str | None = None,
              map_index: int | None = None) -> RunFacts:
    """The run's lakes, tables, batch and stream states (``facts_of`` its rendered task instances)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as Rendered
    from airflow.models.taskinstance import TaskInstance

    state = session.scalar(select(DagRun.state).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
    instances = {(ti.task_id, ti.map_index): ti for ti in session.scalars(
        select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id))}
    rendered_tasks = []
    for ti_task, ti_map, values in session.execute(select(
            Rendered.task_id, Rendered.map_index, Rendered.rendered_fields).where(
            Rendered.dag_id == dag_id, Rendered.run_id == run_id)):
        ti = instances.get((ti_task, ti_map))
        if isinstance(values, Mapping):
            rendered_tasks.append(RenderedTask(
                ti_task, ti_map, values, None if ti is None or ti.state is None else str(ti.state),
                None if ti is None else ti.operator, 0 if ti is None else ti.try_number))
    return facts_of(RunFacts(dag_id, run_id, None if state is None else str(state)), rendered_tasks, task_id,
                    map_index)


def facts_of(facts: RunFacts, rendered_tasks: Iterable[RenderedTask], task_id: str | None = None,
             map_index: int | None = None) -> RunFacts:
    """``facts`` filled from the run's rendered task instances; with ``task_id`` (and ``map_index``), the
    tables are those of that task instance only."""
    run_tables: set[str] = set()
    task_tables: set[str] = set()
    by_pattern = False  # a task choosing its tables by patterns: the run's tables are not all named
    for task in rendered_tasks:
        lake = _lake(task.fields)
        if lake is None:
            continue
        if lake not in facts.lakes:
            facts.lakes.append(lake)
        batches = _batches(task.fields.get("batch"))
        named = _tables(task.fields.get("tables"))
        by_pattern |= "tables" in task.fields and named is None
        tables = {str(table) for table, _ in batches} | (named or set())
        run_tables |= tables
        if task.task_id == task_id and (map_index is None or map_index < 0 or task.map_index == map_index):
            task_tables |= tables
        batch_state = _BATCH_STATES.get(str(task.state))
        if batch_state is not None:
            for batch in batches:
                facts.batch_states[batch] = batch_state
        if task.operator == STREAM_OPERATOR:
            facts.streams[lake] = TaskState(task.task_id, task.map_index, task.state, task.try_number)
    facts.tables = (task_tables or None) if task_id else (None if by_pattern else run_tables or None)
    return facts


def cdc_dag_ids(session: Session, readable: Iterable[str]) -> list[str]:
    """The DAGs among ``readable`` that ran a task of this package."""
    from airflow.models.taskinstance import TaskInstance

    readable = set(readable)
    found = session.scalars(select(TaskInstance.dag_id).where(TaskInstance.operator.in_(OPERATORS)).distinct())
    return sorted(d for d in found if d in readable)


def runs_of(session: Session, run_ids: Iterable[str], readable: Iterable[str]) -> dict[str, str]:
    """The DAG of each of ``run_ids`` among the ``readable`` DAGs (a run id another DAG also has: left out)."""
    from airflow.models.dagrun import DagRun

    run_ids, readable = set(run_ids), set(readable)
    if not run_ids:
        return {}
    found: dict[str, set[str]] = {}
    for dag_id, run_id in session.execute(select(DagRun.dag_id, DagRun.run_id).where(DagRun.run_id.in_(run_ids))):
        if dag_id in readable:
            found.setdefault(run_id, set()).add(dag_id)
    return {run: next(iter(dags)) for run, dags in found.items() if len(dags) == 1}
