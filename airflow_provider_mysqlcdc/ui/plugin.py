"""The Airflow 3 plugin this provider registers (provider info ``plugins``): the page's FastAPI app under
``/mysql-cdc``, a "MySQL CDC" entry in the UI's navigation, and a "MySQL CDC" tab on DAG runs and
task instances showing the page filtered to that run's (or that task's) tables.

Airflow's UI shows an external view with a ``url_route`` inside its own frame, its ``href`` templated
with ``{DAG_ID}``, ``{RUN_ID}``, ``{TASK_ID}`` and ``{MAP_INDEX}``; the page reads the session cookie of
the UI, so the user's permissions apply there as in the API.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_mysqlcdc.ui.app import URL_PREFIX, app

_DAG_PAGE = f"{URL_PREFIX}/dags/{{DAG_ID}}"


class MySqlCdcPlugin(AirflowPlugin):
    """The "MySQL CDC" page."""

    name = "mysql_cdc"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "MySQL CDC"}]
    external_views = [
        {"name": "MySQL CDC", "href": f"{URL_PREFIX}/", "destination": "nav", "url_route": "mysql-cdc",
         "category": "browse"},
        {"name": "MySQL CDC", "href": f"{_DAG_PAGE}?run_id={{RUN_ID}}", "destination": "dag_run",
         "url_route": "mysql-cdc-run"},
        {"name": "MySQL CDC", "href": f"{_DAG_PAGE}?run_id={{RUN_ID}}&task_id={{TASK_ID}}&map_index={{MAP_INDEX}}",
         "destination": "task_instance", "url_route": "mysql-cdc-task"},
    ]
