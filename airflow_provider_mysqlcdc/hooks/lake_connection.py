"""The lake's credentials from an Airflow connection: ``lake_conn_id`` turned into storage options.

Like the official providers' ``aws_conn_id``, the connection is of type ``aws`` and holds what the
Amazon provider's documentation puts there: login and password are the access key id and the secret
access key; the extra may hold ``aws_session_token``, ``region_name`` and ``endpoint_url`` (an S3
compatible store: MinIO, Ceph, a test server). What the connection leaves empty comes from the
environment as without a connection: the standard AWS variables, the profile, the instance's or pod's
role. No connection (``lake_conn_id`` None) is the environment alone.

The result is in delta-rs's ``storage_options`` names (``lake.handle`` builds pyarrow's filesystem
from the same); secrets are masked in task logs, and the Spark jobs get them through an environment
variable of ``spark-submit`` only (``operators.spark_submit``), never on a command line.
"""

from __future__ import annotations

from airflow.sdk import BaseHook
from airflow.sdk.log import mask_secret

from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

LAKE_CONN_TYPE = "aws"
_EXTRAS = {"aws_session_token": "AWS_SESSION_TOKEN", "region_name": "AWS_REGION", "endpoint_url": "AWS_ENDPOINT_URL"}
"""The connection's extras this package reads, and the storage option each becomes."""


def lake_storage_options(lake_conn_id: str | None) -> dict[str, str]:
    """The storage options of the lake connection ``lake_conn_id`` ({} for None: the environment's)."""
    if not lake_conn_id:
        return {}
    conn = BaseHook.get_connection(lake_conn_id)
    if conn.conn_type != LAKE_CONN_TYPE:
        raise InvalidOptionError(
            f"the lake connection {lake_conn_id!r} is of type {conn.conn_type!r}: make it an {LAKE_CONN_TYPE!r} "
            f"connection (login: access key id, password: secret access key, extra: {', '.join(_EXTRAS)})")
    extra = conn.extra_dejson
    unknown = sorted(set(extra) - set(_EXTRAS))
    if unknown:
        # an ignored role_arn or profile_name would silently write with other credentials than meant
        raise InvalidOptionError(
            f"the lake connection {lake_conn_id!r} has extras this provider does not read: {', '.join(unknown)}; "
            f"it reads {', '.join(_EXTRAS)} (a role comes from the environment: leave login and password empty)")
    if bool(conn.login) != bool(conn.password):
        raise InvalidOptionError(
            f"the lake connection {lake_conn_id!r} has {'a login' if conn.login else 'a password'} without "
            f"{'a password' if conn.login else 'a login'}: set both (access key id and secret access key), or "
            f"neither to take the credentials from the environment")
    options = {name: str(extra[key]) for key, name in _EXTRAS.items() if extra.get(key)}
    if conn.login and conn.password:
        options.update(AWS_ACCESS_KEY_ID=conn.login, AWS_SECRET_ACCESS_KEY=conn.password)
    for secret in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        if secret in options:
            mask_secret(options[secret])
    if options.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        options["AWS_ALLOW_HTTP"] = "true"  # delta-rs refuses a plain-http endpoint without it
    return options
