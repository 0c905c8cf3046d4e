"""Checks every PySpark application of the package makes before its tasks read the binlog.

Each Spark task of a job reads the binlog under its own server id (given by the split or the verify
plan). A speculative copy of a task would read under the same id, and the server drops one of the two
connections: speculation must be off for these jobs.
"""

from __future__ import annotations

from typing import Any


def speculation_refusal(spark: Any, job: str) -> str | None:
    """The error message when ``spark.speculation`` is on for ``job`` (``snapshot``, ``verify``), else None."""
    if spark.sparkContext.getConf().get("spark.speculation", "false").strip().lower() != "true":
        return None
    return (f"{job}: spark.speculation is on: a speculative copy of a task would read the binlog with the same "
            f"server id as the task itself, and the server drops one of them; set spark.speculation=false for "
            f"this job")
