"""Is the server set up for CDC? Every problem at once, each with the setting or GRANT that fixes it.

Facts are gathered from the server first and judged by a pure function, so that the judging can be
tested for settings a shared test server cannot take (``log_bin`` off, old versions). The global
values count, because the binlog is written with them, not with this session's.

``binlog_row_metadata`` is not required: with FULL the table maps name their columns and the reader checks
them by name; with MINIMAL or NO_LOG (the servers' defaults) it reads them by position against the schema the
stream keeps for each table (``binlog.reader``). MySQL 5.7 writes no row metadata at all: the same reading
would do for it, but it is not proven on 5.7's own bytes, so it stays refused.

``SHOW GRANTS`` output is parsed but never quoted in a message: it can carry the password hash.
Privileges that reach the user only through a role are not resolved (MySQL 8 / MariaDB roles
must be active by default to count); grant them directly if the check reports them missing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_mysqlcdc.cdc.source.server_info import MARIADB, ServerInfo
from airflow_provider_mysqlcdc.cdc.source.sql import quote_identifier
from airflow_provider_mysqlcdc.exceptions import SourceConfigError

_log = logging.getLogger(__name__)
_VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata")
_NAME = r"(?:`(?:[^`]|``)+`|[^\s.`]+)"
# the object may be prefixed (``ON TABLE``/``ON PROCEDURE``); a quoted name may hold dots and spaces
_GRANT = re.compile(
    rf"^GRANT (?P<privs>.+?) ON (?:(?P<kind>TABLE|FUNCTION|PROCEDURE|PACKAGE(?: BODY)?) )?"
    rf"(?P<database>{_NAME})\.(?P<table>{_NAME}) TO ",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SourceFacts:
    server: ServerInfo
    variables: dict[str, str]
    """Global values, lower-case names; a variable the server lacks is absent."""
    privileges: dict[str, set[str]] = field(default_factory=dict)
    """Scope (``*.*`` or a database name) -> upper-case privilege names."""


def gather_facts(conn: Any) -> SourceFacts:
    server = ServerInfo.read(conn)
    with conn.cursor() as cur:
        marks = ", ".join(["%s"] * len(_VARIABLES))
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({marks})", list(_VARIABLES))
        variables = {name.lower(): str(value) for name, value in cur.fetchall()}
        cur.execute("SHOW GRANTS FOR CURRENT_USER()")
        grants = [row[0] for row in cur.fetchall()]
    return SourceFacts(server, variables, parse_grants(grants))


def parse_grants(grants: Iterable[str]) -> dict[str, set[str]]:
    privileges: dict[str, set[str]] = {}
    for grant in grants:
        match = _GRANT.match(grant.strip())
        if not match or match.group("privs").upper().startswith("PROXY"):
            continue
        database, table = match.group("database"), match.group("table")
        if table != "*" or (match.group("kind") or "TABLE").upper() != "TABLE":
            continue  # table-level and routine grants: discovery reports tables it cannot see
        scope = "*.*" if database == "*" else database.removeprefix("`").removesuffix("`").replace("``", "`")
        names = {re.sub(r"\s*\(.*\)$", "", p.strip()).upper() for p in match.group("privs").split(",")}
        privileges.setdefault(scope, set()).update(names)
    return privileges


def find_problems(facts: SourceFacts, databases: Sequence[str] = ()) -> list[str]:
    server, variables = facts.server, facts.variables
    problems = []
    if server.flavor == MARIADB and server.version < (10, 5, 0):
        problems.append(f"MariaDB {server.version_string} is too old: use MariaDB 10.5 or newer")
    if server.flavor != MARIADB and server.version < (8, 0, 14):
        problems.append(f"MySQL {server.version_string} is not supported: its binlog's table maps carry no column "
                        f"names, signedness or character sets (binlog_row_metadata exists from MySQL 8.0.14 on), and "
                        f"reading its rows by position against the schema the stream keeps is not proven on MySQL "
                        f"5.7's binlog; use MySQL 8.0.14 or newer (8.0, 8.4 or 9.x)")
    if variables.get("log_bin", "OFF").upper() not in ("ON", "1"):
        problems.append("log_bin is OFF: start the server with log_bin (binary logging) enabled")
    expected = {"binlog_format": "ROW", "binlog_row_image": "FULL"}
    for name, value in expected.items():
        actual = variables.get(name)
        if actual is None:
            problems.append(f"the server reports no {name}: it must be {value}")
        elif actual.upper() != value:
            problems.append(f"{name} is {actual}: SET GLOBAL {name} = '{value}' (and in the server config)")
    problems.extend(_missing_privileges(facts, databases))
    return problems


def _database_pattern(scope: str) -> re.Pattern[str]:
    """A database-level GRANT names a LIKE pattern: ``%`` and ``_`` are wildcards unless escaped."""
    parts, escaped = [], False
    for char in scope:
        if escaped or char not in "\\%_":
            parts.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            parts.append(".*" if char == "%" else ".")
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


def _missing_privileges(facts: SourceFacts, databases: Sequence[str]) -> list[str]:
    def covers(granted: set[str], privilege: str) -> bool:
        return privilege in granted or "ALL PRIVILEGES" in granted or "ALL" in granted

    def held(privilege: str, database: str | None = None) -> bool:
        """On ``*.*``, or (with ``database``) on a database-level grant whose pattern matches it."""
        return any(
            covers(granted, privilege)
            for scope, granted in facts.privileges.items()
            if scope == "*.*" or (database is not None and _database_pattern(scope).match(database))
        )

    # REPLICATION CLIENT is MariaDB's old name for BINLOG MONITOR, which SHOW GRANTS may print
    monitor = ("BINLOG MONITOR", "REPLICATION CLIENT") if facts.server.flavor == MARIADB else ("REPLICATION CLIENT",)
    wanted = [("REPLICATION SLAVE", ("REPLICATION SLAVE", "REPLICATION REPLICA")), (monitor[0], monitor)]
    missing = [name for name, aliases in wanted if not any(held(a) for a in aliases)]
    problems = [f"the CDC user lacks {name}: GRANT {name} ON *.* TO <cdc user>" for name in missing]
    problems += [
        f"the CDC user lacks SELECT on {d}: GRANT SELECT ON {quote_identifier(d)}.* TO <cdc user>"
        for d in sorted(databases)
        if not held("SELECT", d)
    ]
    # without captured databases named, any SELECT will do: discovery reports what it cannot see
    if not databases and not any(covers(granted, "SELECT") for granted in facts.privileges.values()):
        problems.append("the CDC user has SELECT on nothing: GRANT SELECT ON <captured database>.* TO <cdc user>")
    return problems


def check_source(conn: Any, databases: Sequence[str] = ()) -> ServerInfo:
    """Raise one SourceConfigError listing every problem; ``databases`` are the captured ones."""
    facts = gather_facts(conn)
    problems = find_problems(facts, databases)
    if problems:
        raise SourceConfigError(
            f"the {facts.server.flavor} server {facts.server.version_string} is not ready for CDC:\n- "
            + "\n- ".join(problems)
        )
    _log.info("%s", row_metadata_path(facts))
    return facts.server


def row_metadata_path(facts: SourceFacts) -> str:
    """How the reader tells a row's columns apart under the server's ``binlog_row_metadata`` (for the log)."""
    setting = facts.variables.get("binlog_row_metadata", "absent").upper()
    if setting == "FULL":
        return "binlog_row_metadata is FULL: table maps name their columns, and the reader checks them by name"
    return (f"binlog_row_metadata is {setting}: table maps carry no column names, so the reader reads rows by "
            f"position, checked against the schema the stream keeps for each table at its offset (a DDL the parser "
            f"cannot read then stops the stream; FULL lets it go on)")
