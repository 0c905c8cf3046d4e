"""The "MySQL CDC" page of the Airflow UI: an Airflow 3 plugin (``ui.plugin``) whose FastAPI app the
api-server serves under ``/mysql-cdc``, behind Airflow's own authentication and DAG permissions.

The top layer, beside the operators: it reads the lake through the lake's and the engine's readers
(``ui.lake_status``, no Airflow there, never a write) and the DAG runs through Airflow's metadata
database (``ui.runs``), and draws both (``ui.page``). Heavy imports (delta-rs, pyarrow) wait for a
request: the api-server and ``airflow plugins`` import the plugin at start.
"""
