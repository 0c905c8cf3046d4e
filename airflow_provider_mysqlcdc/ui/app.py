"""The plugin's FastAPI app, which the api-server mounts under ``URL_PREFIX``: the page and its JSON.

Security is Airflow's own: each route of a DAG depends on ``requires_access_dag`` (the dependency the
core API's task instance routes use), so the api-server's auth manager decides, for the user of the
request's token or session cookie, whether they may read that DAG's task instances; a user who may
not gets 403 before the lake or the metadata database is read, and an unauthenticated request 401.
The index lists only the DAGs ``get_authorized_dag_ids`` gives the user.

Handlers are plain functions (FastAPI runs them in its thread pool: the lake is read with blocking
calls), and import the lake's readers when called: the api-server imports this module at start.
"""

from __future__ import annotations

import time
from typing import Annotated

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from airflow_provider_mysqlcdc.ui.page import DagStatus, LakeReport

URL_PREFIX = "/mysql-cdc"
"""Where the api-server serves the app (and the page's links point)."""

_READ_DAG = [Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.TASK_INSTANCE))]

app = FastAPI(title="MySQL CDC", description="The MySQL CDC replicas of the DAGs you may read: snapshot "
              "chunks, stream, verification (airflow-provider-mysqlcdc).", docs_url=None, redoc_url=None)


def _airflow_root(request: Request) -> str:
    """The Airflow UI's root path (the api-server may be served under a path), from the mount's root path."""
    return str(request.scope.get("root_path", "")).removesuffix(URL_PREFIX)


def dag_status(session: SessionDep, user: BaseUser, dag_id: str, run_id: str | None, task_id: str | None,
               map_index: int | None) -> DagStatus:
    """The DAG's status at ``run_id`` (default: its latest run): its lakes read as its tasks rendered them."""
    from airflow.models.dag import DagModel

    from airflow_provider_mysqlcdc.hooks.lake_connection import lake_storage_options
    from airflow_provider_mysqlcdc.lake.handle import Lake
    from airflow_provider_mysqlcdc.ui.lake_status import lake_status
    from airflow_provider_mysqlcdc.ui.runs import latest_run_id, run_facts, runs_of

    if session.get(DagModel, dag_id) is None:
        raise HTTPException(404, f"no DAG {dag_id!r}")
    run_id = run_id or latest_run_id(session, dag_id)
    if run_id is None:
        return DagStatus(dag_id, None, None, None, task_id)
    facts = run_facts(session, dag_id, run_id, task_id, map_index)
    now = time.time()
    reports = []
    for lake in facts.lakes:
        task = facts.streams.get(lake)
        try:
            handle = Lake.at(lake.base_uri, lake_storage_options(lake.lake_conn_id))
            status = lake_status(handle, sorted(facts.tables) if facts.tables else None, facts.batch_states, now)
        except Exception as err:  # one unreadable lake (gone, no credentials here) must not hide the others
            reports.append(LakeReport(lake, None, task, f"{type(err).__name__}: {err}"))
            continue
        reports.append(LakeReport(lake, status, task))
    verifications = {t.verification.run for r in reports if r.status is not None for t in r.status.tables
                     if t.verification is not None}
    readable = get_auth_manager().get_authorized_dag_ids(user=user, method="GET", session=session)
    return DagStatus(dag_id, run_id, facts.run_state, sorted(facts.tables) if facts.tables else None, task_id,
                     reports, runs_of(session, verifications, readable))


RunQuery = Annotated[str | None, Query(description="a run id (default: the DAG's latest run)")]
TaskQuery = Annotated[str | None, Query(description="a task id: only the tables of that task")]
MapQuery = Annotated[int | None, Query(description="with task_id: one mapped task instance")]


@app.get("/", response_class=HTMLResponse)
def index(request: Request, session: SessionDep, user: GetUserDep) -> str:
    """The DAGs the user may read that ran a task of this package, each linking to its page."""
    from airflow_provider_mysqlcdc.ui.page import render_index
    from airflow_provider_mysqlcdc.ui.runs import cdc_dag_ids

    readable = get_auth_manager().get_authorized_dag_ids(user=user, method="GET", session=session)
    return render_index(cdc_dag_ids(session, readable), str(request.scope.get("root_path", "")))


@app.get("/api/dags")
def list_dags(session: SessionDep, user: GetUserDep) -> dict[str, list[str]]:
    """The same list as JSON."""
    from airflow_provider_mysqlcdc.ui.runs import cdc_dag_ids

    readable = get_auth_manager().get_authorized_dag_ids(user=user, method="GET", session=session)
    return {"dag_ids": cdc_dag_ids(session, readable)}


@app.get("/dags/{dag_id}", response_class=HTMLResponse, dependencies=_READ_DAG)
def dag_page(request: Request, session: SessionDep, user: GetUserDep, dag_id: str, run_id: RunQuery = None,
             task_id: TaskQuery = None, map_index: MapQuery = None) -> str:
    """The page of one DAG: its lakes' tables and streams at a run."""
    from airflow_provider_mysqlcdc.ui.page import render_dag

    status = dag_status(session, user, dag_id, run_id, task_id, map_index)
    return render_dag(status, _airflow_root(request), str(request.url).replace(
        f"{URL_PREFIX}/dags/", f"{URL_PREFIX}/api/dags/", 1))


@app.get("/api/dags/{dag_id}", dependencies=_READ_DAG)
def dag_json(session: SessionDep, user: GetUserDep, dag_id: str, run_id: RunQuery = None, task_id: TaskQuery = None,
             map_index: MapQuery = None) -> dict[str, object]:
    """The page's data as JSON (``DagStatus``)."""
    return dag_status(session, user, dag_id, run_id, task_id, map_index).to_dict()
