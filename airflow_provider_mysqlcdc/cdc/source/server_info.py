"""Which server we talk to: the flavour and version decide the SQL for offsets and the checks to run."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from airflow_provider_mysqlcdc.exceptions import SourceConfigError

MYSQL = "mysql"
MARIADB = "mariadb"


@dataclass(frozen=True)
class ServerInfo:
    flavor: str
    version: tuple[int, int, int]
    version_string: str

    @property
    def is_mariadb(self) -> bool:
        return self.flavor == MARIADB

    @property
    def binary_log_status_sql(self) -> str:
        """MySQL 8.4 removed ``SHOW MASTER STATUS`` in favour of ``SHOW BINARY LOG STATUS``."""
        if self.flavor == MYSQL and self.version >= (8, 4, 0):
            return "SHOW BINARY LOG STATUS"
        return "SHOW MASTER STATUS"

    @classmethod
    def from_version(cls, version_string: str, version_comment: str = "") -> ServerInfo:
        """``10.11.19-MariaDB-0+deb12u1`` or ``8.0.36``; MariaDB also says so in the comment."""
        match = re.match(r"^(\d+)\.(\d+)\.(\d+)", version_string)
        if not match:
            raise SourceConfigError(
                f"cannot read the server version from {version_string!r}: the mysql_cdc connection must "
                f"point at MySQL (5.7, 8.0, 8.4+) or MariaDB (10.5+)"
            )
        flavor = MARIADB if "mariadb" in f"{version_string} {version_comment}".lower() else MYSQL
        major, minor, patch = (int(g) for g in match.groups())
        return cls(flavor, (major, minor, patch), version_string)

    @classmethod
    def read(cls, conn: Any) -> ServerInfo:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION(), @@version_comment")
            version, comment = cur.fetchone()
        return cls.from_version(version, comment or "")
