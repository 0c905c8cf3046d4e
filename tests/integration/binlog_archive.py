"""The test server's binlog copied as a user archives it: ``mariadb-binlog --read-from-remote-server --raw``.

Shared by the tests that read binlog files instead of the server's dump (the files against the live dump, the
stream's lost range read from an archive).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from airflow_provider_mysqlcdc.cdc.binlog.binlog_files import BinlogFiles


def copy_binlog(server: Any, first: str, folder: Path) -> BinlogFiles:
    """The server's binlog from file ``first`` to its current end, copied into ``folder`` as an archive is:
    ``mariadb-binlog --read-from-remote-server --raw`` as the CDC user, its password in a defaults file of its
    own (never on the command line)."""
    client = shutil.which("mariadb-binlog") or "/usr/bin/mariadb-binlog"
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as private:
        defaults = Path(private) / "client.cnf"
        defaults.touch(mode=0o600)
        defaults.write_text(f'[client]\npassword="{server.cdc_password}"\n')
        subprocess.run(
            [client, f"--defaults-extra-file={defaults}", "--read-from-remote-server", "--raw", "--to-last-log",
             f"--host={server.host}", f"--port={server.port}", f"--user={server.cdc_user}",
             f"--result-file={folder}/", first],
            check=True, capture_output=True, timeout=60,
        )
    return BinlogFiles.in_folder(folder)
