"""Is the server set up for CDC? Every problem at once, each with the setting or GRANT that fixes it.

Facts are gathered from the server first and judged by a pure function, so that the judging can be
tested for settings a shared test server cannot take (``log_bin`` off, old versions). The global
values count, because the binlog is written with them, not with this session's.

``SHOW GRANTS`` output is parsed but never quoted in a message: it can carry the password hash.
Privileges that reach the user only through a role are not resolved (MySQL 8 / MariaDB roles
must be active by default to count); grant them directly if the check reports them missing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_mysqlcdc.cdc.server_info import MARIADB, ServerInfo
from airflow_provider_mysqlcdc.exceptions import SourceConfigError

_VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata")
_GRANT = re.compile(r"^GRANT (?P<privs>.+?) ON (?P<scope>\S+) TO ", re.IGNORECASE)


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
        scope = match.group("scope")
        if scope != "*.*":
            database, _, table = scope.partition(".")
            if table != "*":
                continue  # table-level grants: discovery reports tables it cannot see
            scope = database.strip("`").replace("``", "`")
        names = {re.sub(r"\s*\(.*\)$", "", p.strip()).upper() for p in match.group("privs").split(",")}
        privileges.setdefault(scope, set()).update(names)
    return privileges


def find_problems(facts: SourceFacts, databases: Sequence[str] = ()) -> list[str]:
    server, variables = facts.server, facts.variables
    problems = []
    if server.flavor == MARIADB and server.version < (10, 5, 0):
        problems.append(f"MariaDB {server.version_string} is too old: use MariaDB 10.5 or newer")
    if server.flavor != MARIADB and server.version < (5, 7, 0):
        problems.append(f"MySQL {server.version_string} is too old: use MySQL 5.7, 8.0 or 8.4+")
    if variables.get("log_bin", "OFF").upper() not in ("ON", "1"):
        problems.append("log_bin is OFF: start the server with log_bin (binary logging) enabled")
    expected = {"binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}
    for name, value in expected.items():
        actual = variables.get(name)
        if actual is None:
            if name != "binlog_row_metadata":  # MySQL before 8.0.14 has no such variable
                problems.append(f"the server reports no {name}: it must be {value}")
        elif actual.upper() != value:
            problems.append(f"{name} is {actual}: SET GLOBAL {name} = '{value}' (and in the server config)")
    problems.extend(_missing_privileges(facts, databases))
    return problems


def _missing_privileges(facts: SourceFacts, databases: Sequence[str]) -> list[str]:
    def held(privilege: str, scope: str = "*.*") -> bool:
        granted = facts.privileges.get(scope, set()) | facts.privileges.get("*.*", set())
        return privilege in granted or "ALL PRIVILEGES" in granted or "ALL" in granted

    # REPLICATION CLIENT is MariaDB's old name for BINLOG MONITOR, which SHOW GRANTS may print
    monitor = ("BINLOG MONITOR", "REPLICATION CLIENT") if facts.server.flavor == MARIADB else ("REPLICATION CLIENT",)
    wanted = [("REPLICATION SLAVE", ("REPLICATION SLAVE", "REPLICATION REPLICA")), (monitor[0], monitor)]
    missing = [name for name, aliases in wanted if not any(held(a) for a in aliases)]
    lacking_select = sorted(d for d in databases if not held("SELECT", d))
    if not databases and not held("SELECT") and not any("SELECT" in p for p in facts.privileges.values()):
        lacking_select = ["*"]
    problems = [f"the CDC user lacks {name}: GRANT {name} ON *.* TO <cdc user>" for name in missing]
    problems += [f"the CDC user lacks SELECT on {d}: GRANT SELECT ON `{d}`.* TO <cdc user>" for d in lacking_select]
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
    return facts.server
