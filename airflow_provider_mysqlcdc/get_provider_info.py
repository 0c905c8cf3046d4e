"""What Airflow learns about this provider through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_provider_mysqlcdc import __version__
from airflow_provider_mysqlcdc.cdc.server_id import DEFAULT_SERVER_ID_RANGE

_STRING = {"type": ["string", "null"]}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-mysqlcdc",
        "name": "MySQL CDC",
        "description": "Consistent replicas of MySQL and MariaDB tables in a data lake: a lock-free "
        "chunked snapshot on Spark, then binlog streaming in a deferrable task.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "MySQL CDC",
                "external-doc-url": "https://github.com/airflow-provider-mysqlcdc/airflow-provider-mysqlcdc",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "MySQL CDC",
                "python-modules": [
                    "airflow_provider_mysqlcdc.operators.split",
                    "airflow_provider_mysqlcdc.operators.snapshot",
                    "airflow_provider_mysqlcdc.operators.stream",
                ],
            }
        ],
        "hooks": [
            {"integration-name": "MySQL CDC", "python-modules": ["airflow_provider_mysqlcdc.hooks.mysql_cdc"]}
        ],
        "triggers": [
            {"integration-name": "MySQL CDC", "python-modules": ["airflow_provider_mysqlcdc.triggers.binlog"]}
        ],
        "connection-types": [
            {
                "connection-type": "mysql_cdc",
                "hook-class-name": "airflow_provider_mysqlcdc.hooks.mysql_cdc.MySqlCdcHook",
                "hook-name": "MySQL CDC",
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"login": "CDC user", "schema": "Default database"},
                    "placeholders": {"port": "3306", "extra": f'{{"server_id": "{DEFAULT_SERVER_ID_RANGE}"}}'},
                },
                "conn-fields": {
                    "server_id": {
                        "label": "Server id range",
                        "description": "Server ids for binlog readers, one per concurrent reader, e.g. "
                        f"{DEFAULT_SERVER_ID_RANGE}. "
                        "A DAG run needs (snapshot batches x readers_per_batch of the split task) + 1 for the "
                        "stream; the split task fails naming the range to set when it is too small. "
                        "Must not clash with any replica or other CDC tool.",
                        "schema": {**_STRING, "default": DEFAULT_SERVER_ID_RANGE},
                    },
                    "server_time_zone": {
                        "label": "Server time zone",
                        "description": "Session time zone of CDC connections; TIMESTAMP values are read as UTC.",
                        "schema": {**_STRING, "default": "+00:00"},
                    },
                    "connect_timeout": {
                        "label": "Connect timeout (s)",
                        "schema": {"type": ["integer", "null"], "default": 10},
                    },
                    "ssl": {
                        "label": "SSL",
                        "description": 'JSON object, e.g. {"ca": "/path/ca.pem", "cert": "...", "key": "...", '
                        '"verify": true}',
                        "schema": {"type": ["object", "null"]},
                    },
                },
            }
        ],
    }
