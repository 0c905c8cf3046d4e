"""What Airflow learns about this provider through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_provider_mysqlcdc import __version__
from airflow_provider_mysqlcdc.assets import SCHEMES
from airflow_provider_mysqlcdc.cdc.source.server_id import DEFAULT_SERVER_ID_RANGE

_STRING = {"type": ["string", "null"]}
# JSON-schema patterns of the form fields; the hook validates the same values (a unit test keeps them in step)
SERVER_ID_PATTERN = r"^\s*\d+\s*(-\s*\d+\s*)?$"
TIME_ZONE_PATTERN = r"^([+-](0\d|1[0-4]):[0-5]\d|[A-Za-z][A-Za-z0-9_+\-/]*)$"
CHARSET_PATTERN = r"^[A-Za-z0-9_]+$"


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
                    "airflow_provider_mysqlcdc.operators.resnapshot",
                    "airflow_provider_mysqlcdc.operators.verify",
                ],
            }
        ],
        "hooks": [
            {"integration-name": "MySQL CDC", "python-modules": ["airflow_provider_mysqlcdc.hooks.mysql_cdc"]}
        ],
        "triggers": [
            {"integration-name": "MySQL CDC", "python-modules": ["airflow_provider_mysqlcdc.triggers.binlog",
                                                                 "airflow_provider_mysqlcdc.triggers.lake_commits"]}
        ],
        "asset-uris": [
            {
                "schemes": list(SCHEMES),
                "handler": "airflow_provider_mysqlcdc.assets.sanitize_uri",
                "factory": "airflow_provider_mysqlcdc.assets.create_asset",
                "to_openlineage_converter": "airflow_provider_mysqlcdc.assets.convert_asset_to_openlineage",
            }
        ],
        "plugins": [
            {"name": "mysql_cdc", "plugin-class": "airflow_provider_mysqlcdc.ui.plugin.MySqlCdcPlugin"},
        ],
        "extra-links": [
            "airflow_provider_mysqlcdc.operators.links.LakeTableLink",
            "airflow_provider_mysqlcdc.operators.links.SparkApplicationLink",
        ],
        "connection-types": [
            {
                "connection-type": "mysql_cdc",
                "hook-class-name": "airflow_provider_mysqlcdc.hooks.mysql_cdc.MySqlCdcHook",
                "hook-name": "MySQL CDC",
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"login": "CDC user", "schema": "Default database"},
                    "placeholders": {
                        "host": "db.example.com",
                        "port": "3306",
                        "login": "cdc",
                        "schema": "optional: checked for SELECT by the Test button",
                        "extra": f'{{"server_id": "{DEFAULT_SERVER_ID_RANGE}"}}',
                    },
                },
                "conn-fields": {
                    "server_id": {
                        "label": "Server id range",
                        "description": "Server ids for binlog readers, one per concurrent reader: a number or a "
                        f"range N-M, e.g. {DEFAULT_SERVER_ID_RANGE} (1 <= N <= M <= 4294967295). "
                        "A DAG run needs (snapshot batches x readers_per_batch of the split task) + 1 for the "
                        "stream; the split task fails naming the range to set when it is too small. "
                        "Must not clash with any replica or other CDC tool.",
                        "schema": {**_STRING, "default": DEFAULT_SERVER_ID_RANGE, "pattern": SERVER_ID_PATTERN},
                    },
                    "server_time_zone": {
                        "label": "Server time zone",
                        "description": "Session time zone of CDC connections: an offset like +00:00 (default) "
                        "or a zone name the server knows (Europe/Paris needs the server's time zone tables). "
                        "TIMESTAMP values are read as UTC instants whatever it is.",
                        "schema": {**_STRING, "default": "+00:00", "pattern": TIME_ZONE_PATTERN},
                    },
                    "connect_timeout": {
                        "label": "Connect timeout (s)",
                        "description": "Seconds to wait for the server when connecting, a whole number >= 1 "
                        "(default 10).",
                        "schema": {"type": ["integer", "null"], "default": 10, "minimum": 1},
                    },
                    "charset": {
                        "label": "Character set",
                        "description": "Character set of the CDC connections (default utf8mb4, which holds "
                        "every character; a narrower one cannot carry what utf8mb4 columns hold).",
                        "schema": {**_STRING, "default": "utf8mb4", "pattern": CHARSET_PATTERN},
                    },
                    "ssl": {
                        "label": "SSL",
                        "description": 'TLS to the server, a JSON object with keys among ca, cert, key, verify, '
                        'e.g. {"ca": "/path/ca.pem", "verify": "identity"}. verify: "identity" (the default, '
                        "or true) checks the certificate's CA and host name, \"ca\" the CA only (Cloud SQL), "
                        '"none" (or false) nothing. Paths as the workers and Spark executors see them. '
                        "Empty: no TLS.",
                        "schema": {"type": ["object", "null"]},
                    },
                },
            }
        ],
    }
