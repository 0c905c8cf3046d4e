"""The asset watcher's trigger in a process of its own, as the triggerer runs it: its lake reached only
through what it is given (``lake_conn_id``: an Airflow connection from the environment).

    python -m tests.trigger_worker <base_uri> <table> <lake_conn_id>

Runs ``MySqlCdcCommitTrigger.run()`` until its first event and prints that event's payload as one JSON
line; ``start`` and ``first_event`` are the test's side.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from airflow_provider_mysqlcdc.triggers.lake_commits import MySqlCdcCommitTrigger

ROOT = Path(__file__).resolve().parents[1]


def start(base_uri: str, table: str, lake_conn_id: str) -> subprocess.Popen[str]:
    """The trigger running in a new process with this process's environment."""
    return subprocess.Popen([sys.executable, "-m", "tests.trigger_worker", base_uri, table, lake_conn_id],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def first_event(worker: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """The payload of the trigger's first event; the worker is ended if it has not printed one in ``timeout``."""
    try:
        out, err = worker.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        worker.kill()
        out, err = worker.communicate()
    assert worker.returncode == 0 and out.strip(), f"no trigger event (exit {worker.returncode}): {err[-2000:]}"
    payload: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return payload


async def _first(trigger: MySqlCdcCommitTrigger) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("the trigger ended without an event")


if __name__ == "__main__":
    base_uri, table, conn_id = sys.argv[1:4]
    print(json.dumps(asyncio.run(_first(MySqlCdcCommitTrigger(base_uri, table, poll_interval=0.5,
                                                               lake_conn_id=conn_id)))), flush=True)
