"""The Airflow side of the source connection: a ``mysql_cdc`` connection turned into a ConnectionConfig.

The connection type is our own because ``mysql`` belongs to the MySQL provider. The form fields
for the extras are declared in ``get_provider_info`` (``conn-fields``), the way Airflow 3.2+ wants.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_mysqlcdc.cdc.connection import ConnectionConfig


class MySqlCdcHook(BaseHook):
    conn_name_attr = "mysql_cdc_conn_id"
    default_conn_name = "mysql_cdc_default"
    conn_type = "mysql_cdc"
    hook_name = "MySQL CDC"

    def __init__(self, mysql_cdc_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mysql_cdc_conn_id = mysql_cdc_conn_id

    def get_config(self) -> ConnectionConfig:
        conn = self.get_connection(self.mysql_cdc_conn_id)
        return ConnectionConfig.from_parts(
            conn.host, conn.port, conn.login, conn.password, conn.schema, conn.extra_dejson
        )

    def get_conn(self) -> Any:
        """A pymysql connection (autocommit, session time zone set) for control queries."""
        return self.get_config().connect()

    def test_connection(self) -> tuple[bool, str]:
        """For the UI's Test button: connects and runs the source checks."""
        from airflow_provider_mysqlcdc.cdc.source_checks import check_source

        try:
            config = self.get_config()
            conn = config.connect()
            try:
                server = check_source(conn)
            finally:
                conn.close()
        except Exception as exc:
            return False, str(exc)
        return True, f"connected to {server.flavor} {server.version_string} as {config.address}; ready for CDC"
