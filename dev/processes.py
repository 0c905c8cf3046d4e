"""Watching and stopping the processes the throwaway deployments start (MariaDB, Spark cluster, Airflow).

Each component is started in a session of its own (``start_new_session``), so its pid is also its
process group's id, and stopping the group stops whatever it started (executors, workers, children).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable


def alive(pid: int) -> bool:
    """Whether ``pid`` runs; our own child that ended is reaped here, else it stays a zombie."""
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:  # not our child (e.g. a server a previous run left running)
        pass
    return _signal_reaches(os.kill, pid)


def group_alive(pgid: int) -> bool:
    return _signal_reaches(os.killpg, pgid)


def _signal_reaches(send: Callable[[int, int], None], target: int) -> bool:
    """Whether ``target`` exists: signal 0 checks without sending (another user's process: it exists)."""
    try:
        send(target, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(pgid: int, sig: int, timeout: float) -> None:
    """``sig`` to the process group ``pgid`` (its leader's pid); SIGKILL to what is left after ``timeout``."""
    for signum, wait in ((sig, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive(pgid) and not group_alive(pgid):
                return
            time.sleep(0.1)
