"""A throwaway MariaDB server with the binlog set up for CDC, for the tests and the quickstart.

It runs Debian's ``mariadbd`` on a private port, data directory and socket, ignoring every
``/etc/mysql`` option file (``--no-defaults``), and creates a CDC user holding only the privileges
the provider needs. The admin account is root over the private socket.

    python -m dev.mariadb start --dir .local/mariadb --port 33061   # prints the server as JSON
    python -m dev.mariadb stop --dir .local/mariadb

A second server can be a GTID replica of the first (the failover test): start it with its own
``server_id``, a ``log_bin`` basename of its own (so its binlog file names and positions differ
from the primary's) and ``REPLICA_ARGS``, then ``replicate(replica, primary)``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from dev.processes import alive

CDC_USER = "cdc"
CDC_PASSWORD = "cdc-secret"
# Only what the provider needs: SELECT to read chunks, BINLOG MONITOR (alias REPLICATION CLIENT)
# to read binlog offsets, REPLICATION SLAVE to stream the binlog. No RELOAD: the snapshot takes
# no locks. SHOW DATABASES lets discovery list databases by regular expression.
CDC_GRANTS = "SELECT, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR"
REPL_USER = "repl"
REPL_PASSWORD = "repl-secret"
# What a primary and its replica need for GTID failover: the replica writes what it applies to its
# own binlog (a stream can continue there), and strict mode refuses out-of-order GTIDs in a domain.
REPLICA_ARGS = ("--log-slave-updates=ON", "--gtid-strict-mode=ON")


@dataclass(frozen=True)
class MariaDbServer:
    host: str
    port: int
    socket: str
    pid: int
    data_dir: str
    cdc_user: str = CDC_USER
    cdc_password: str = CDC_PASSWORD

    def admin_connect(self, database: str | None = None, **kwargs: object):  # -> pymysql.Connection
        import pymysql

        return pymysql.connect(
            unix_socket=self.socket, user="root", database=database, charset="utf8mb4",
            autocommit=True, **kwargs,  # type: ignore[arg-type]
        )

    def cdc_connect(self, database: str | None = None, **kwargs: object):
        import pymysql

        return pymysql.connect(
            host=self.host, port=self.port, user=self.cdc_user, password=self.cdc_password,
            database=database, charset="utf8mb4", autocommit=True, **kwargs,  # type: ignore[arg-type]
        )


def _state_file(base: Path) -> Path:
    return base / "server.json"


def _binary(name: str) -> str:
    for candidate in (shutil.which(name), f"/usr/sbin/{name}", f"/usr/bin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError(
        f"{name} not found: install Debian's mariadb-server (apt-get install mariadb-server)"
    )


def running(base: Path) -> MariaDbServer | None:
    """The server recorded under ``base`` if its process is still alive."""
    state = _state_file(base)
    if not state.exists():
        return None
    server = MariaDbServer(**json.loads(state.read_text()))
    return server if alive(server.pid) else None


def start(base: Path, port: int, timeout: float = 60.0, server_id: int = 1, log_bin: str = "mysql-bin",
          extra_args: Sequence[str] = ()) -> MariaDbServer:
    """Start (or reuse) the server under ``base``; the data directory is created on first use.

    The CDC account is created with ``sql_log_bin=0``: it is each server's own, not a change to
    replicate (on a replica it would be a GTID of its own ahead of the primary's, which strict mode
    then refuses)."""
    base = base.resolve()
    existing = running(base)
    if existing:
        return existing
    data_dir = base / "data"
    socket = base / "mysqld.sock"
    log = base / "error.log"
    base.mkdir(parents=True, exist_ok=True)
    user_args = ["--user=root"] if os.geteuid() == 0 else []
    if not (data_dir / "mysql").exists():
        subprocess.run(
            [_binary("mariadb-install-db"), "--no-defaults", f"--datadir={data_dir}",
             "--auth-root-authentication-method=socket", "--skip-test-db", *user_args],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
    args = [
        _binary("mariadbd"), "--no-defaults", *user_args,
        f"--datadir={data_dir}", f"--socket={socket}", f"--port={port}",
        "--bind-address=127.0.0.1", f"--pid-file={base / 'mysqld.pid'}", f"--log-error={log}",
        f"--server-id={server_id}", f"--log-bin={log_bin}", "--binlog-format=ROW", "--binlog-row-image=FULL",
        "--binlog-row-metadata=FULL", "--skip-name-resolve",
        "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
        "--default-time-zone=+00:00", "--innodb-buffer-pool-size=512M",
        "--innodb-flush-log-at-trx-commit=2", "--sync-binlog=0", "--max-connections=300", *extra_args,
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    import pymysql

    while True:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"mariadbd exited with {proc.returncode}; its log ends:\n{tail}")
        try:
            conn = pymysql.connect(unix_socket=str(socket), user="root", autocommit=True)
            break
        except pymysql.err.OperationalError as err:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"mariadbd did not accept connections within {timeout}s; see {log}") from err
            time.sleep(0.2)
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s", (CDC_USER, CDC_PASSWORD))
        cur.execute(f"GRANT {CDC_GRANTS} ON *.* TO %s@'%%'", (CDC_USER,))
    conn.close()
    server = MariaDbServer("127.0.0.1", port, str(socket), proc.pid, str(data_dir))
    _state_file(base).write_text(json.dumps(asdict(server)))
    return server


def replicate(replica: MariaDbServer, primary: MariaDbServer) -> None:
    """Make ``replica`` a GTID replica of ``primary`` (``MASTER_USE_GTID=slave_pos``) and start it.

    The replication account is created on the primary without binlogging it, like the CDC one.
    """
    with primary.admin_connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute("CREATE USER IF NOT EXISTS %s@'127.0.0.1' IDENTIFIED BY %s", (REPL_USER, REPL_PASSWORD))
        cur.execute("GRANT REPLICATION SLAVE ON *.* TO %s@'127.0.0.1'", (REPL_USER,))
    with replica.admin_connect() as conn, conn.cursor() as cur:
        cur.execute("STOP SLAVE")
        cur.execute("CHANGE MASTER TO MASTER_HOST = %s, MASTER_PORT = %s, MASTER_USER = %s, MASTER_PASSWORD = %s, "
                    "MASTER_USE_GTID = slave_pos", (primary.host, primary.port, REPL_USER, REPL_PASSWORD))
        cur.execute("START SLAVE")


def _gtid_seqs(text: str) -> dict[int, int]:
    """A MariaDB GTID position as sequence number per domain."""
    parts = [p.strip().split("-") for p in (text or "").split(",") if p.strip()]
    return {int(domain): int(seq) for domain, _, seq in parts}


def wait_caught_up(replica: MariaDbServer, primary: MariaDbServer, timeout: float = 60.0) -> str:
    """Wait until the replica has applied everything in the primary's binlog (its ``gtid_slave_pos``
    covers the primary's ``gtid_binlog_pos``, domain by domain); returns that position."""
    with primary.admin_connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        target = str(cur.fetchone()[0])
    deadline = time.monotonic() + timeout
    with replica.admin_connect() as conn, conn.cursor() as cur:
        while True:
            cur.execute("SELECT @@gtid_slave_pos")
            applied = _gtid_seqs(str(cur.fetchone()[0]))
            if all(applied.get(domain, 0) >= seq for domain, seq in _gtid_seqs(target).items()):
                return target
            if time.monotonic() > deadline:
                cur.execute("SHOW SLAVE STATUS")
                status = cur.fetchone()
                raise RuntimeError(f"the replica did not reach {target} within {timeout}s: {status}")
            time.sleep(0.05)


def stop(base: Path, timeout: float = 60.0) -> None:
    """Stop the server under ``base`` by its PID and wait for it to exit."""
    server = running(base.resolve())
    if server is None:
        return
    os.kill(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(server.pid):
        try:  # reap it if it is our child, else it would stay a zombie
            os.waitpid(server.pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if time.monotonic() > deadline:
            os.kill(server.pid, signal.SIGKILL)
            break
        time.sleep(0.1)
    _state_file(base.resolve()).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--dir", default=".local/mariadb", help="folder for data, socket, log and PID")
    parser.add_argument("--port", type=int, default=33061)
    args = parser.parse_args(argv)
    base = Path(args.dir)
    if args.action == "start":
        print(json.dumps(asdict(start(base, args.port))))
    elif args.action == "stop":
        stop(base)
    else:
        server = running(base.resolve())
        print(json.dumps(asdict(server)) if server else "not running")
        return 0 if server else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
