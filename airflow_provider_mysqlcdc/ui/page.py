"""The page itself: a DAG's MySQL CDC status as server-rendered HTML with inline SVG, no JavaScript
framework (it loads in an iframe of Airflow's UI, and a headless browser tests what it shows).

Every value is escaped; every figure a test or a script may want carries a ``data-`` attribute (the
table's name, its chunk counts, the stream's lag), and the same figures are the plugin's JSON
(``DagStatus.to_dict``). A chunk is a square coloured by its state with its key range, rows and high
watermark as its tooltip; the stream's lag and rows/s over the last hours are one SVG chart. Beside the
lag, the binlog margin: how long the checkpoint's binlog file had left on the server at the last check,
in the warning colour below the stream's ``binlog_margin_seconds``, with the check's age (a stream that
is down stops checking: an old figure says so).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import quote

from airflow_provider_mysqlcdc.cdc.source.retention import MarginLimit, duration
from airflow_provider_mysqlcdc.ui.lake_status import (
    CHUNK_STATES,
    CommitPoint,
    LakeStatus,
    MarginView,
    StreamView,
    TableView,
)
from airflow_provider_mysqlcdc.ui.runs import LakeRef, TaskState

REFRESH_SECONDS = 30
_FAILED_TASK_STATES = ("failed", "up_for_retry", "upstream_failed")
"""A stream task in these states stopped on an error: the page links to its log."""
_COLORS = {"done": "#2e7d32", "running": "#1e88e5", "failed": "#c62828", "pending": "#bdbdbd"}


@dataclass(frozen=True)
class LakeReport:
    """One lake of the run: its status, or why it could not be read."""

    lake: LakeRef
    status: LakeStatus | None
    stream_task: TaskState | None = None
    error: str | None = None


@dataclass(frozen=True)
class DagStatus:
    """What the page and the JSON show of one DAG (at one run)."""

    dag_id: str
    run_id: str | None
    run_state: str | None
    tables: list[str] | None
    task_id: str | None
    lakes: list[LakeReport] = field(default_factory=list)
    verification_dags: dict[str, str] = field(default_factory=dict)
    """The DAG (one the user may read) of each verification run the tables' latest reports name."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n:,} B"
    size, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:,.1f} {unit}"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:16px;color:#212121}h1{font-size:20px}h2{font-size:17px;margin-top:24px}
table{border-collapse:collapse;margin:8px 0}th,td{border-bottom:1px solid #e0e0e0;padding:4px 8px;text-align:left;
vertical-align:top;font-size:13px}th{background:#f5f5f5}.chunks{display:flex;flex-wrap:wrap;gap:2px;max-width:420px}
.chunk{width:14px;height:14px;border-radius:2px;display:inline-block}.muted{color:#757575}.bad{color:#c62828}
.good{color:#2e7d32}.facts td:first-child{color:#616161}.legend span{margin-right:12px}code{font-size:12px}
"""


def _chunk_picture(table: TableView) -> str:
    squares = []
    for c in table.chunks:
        tip = (f"chunk {c.index} [{c.start if c.start is not None else '-inf'}, "
               f"{c.end if c.end is not None else '+inf'}) · batch {c.batch} {c.state}")
        if c.rows is not None:
            tip += f" · {c.rows:,} rows · high watermark {c.high_watermark}"
        squares.append(f'<span class="chunk" data-chunk="{c.index}" data-state="{c.state}" title="{_e(tip)}" '
                       f'style="background:{_COLORS[c.state]}"></span>')
    counts = table.chunk_counts()
    words = ", ".join(f'<span data-count="{s}">{counts[s]}</span> {s}' for s in CHUNK_STATES if counts[s])
    return (f'<div class="chunks">{"".join(squares)}</div><div class="muted"><span data-field="chunks">'
            f'{len(table.chunks)}</span> {_plural(len(table.chunks), "chunk")} in {_counted(table.batches, "batch")}: '
            f'{words or "none planned"}</div>')


def _verification(table: TableView, airflow_root: str, dags: dict[str, str]) -> str:
    """The verdict; with the DAG that ran the verification (``dags``: run id to DAG), links to its run and
    to the DAG, where a run with ``repair`` on reads the differing chunks again."""
    v = table.verification
    if v is None:
        return '<span class="muted" data-verdict="none">not verified</span>'
    dag = dags.get(v.run)
    run = _e(v.run)
    if dag is not None:
        run = (f'<a href="{_e(airflow_root)}/dags/{quote(dag, safe="")}/runs/{quote(v.run, safe="")}" '
               f'target="_top">{run}</a>')
    if v.equal:
        return (f'<span class="good" data-verdict="equal">equal</span> <span class="muted">({v.chunks} chunks, '
                f"{v.rows:,} rows; run {run}, {_e(v.written_at)})</span>")
    chunks = ", ".join(str(i) for i in v.differing_chunks[:20]) + (", ..." if len(v.differing_chunks) > 20 else "")
    repair = (f'<a href="{_e(airflow_root)}/dags/{quote(dag, safe="")}" target="_top" data-field="repair">repair</a>: '
              f"trigger {_e(dag)} with <code>repair</code> on" if dag is not None else
              "repair: run the verification DAG again with <code>repair</code> on")
    return (f'<span class="bad" data-verdict="differs">{len(v.differing_chunks)} chunks differ</span> ({chunks}): '
            f'{v.missing} keys missing, {v.extra} extra, {v.different} different <span class="muted">(run '
            f'{run})</span><br>{repair} (docs: "Repairing ranges of a replica")')


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + ("es" if word.endswith("ch") else "s")


def _counted(n: int, word: str) -> str:
    """``n`` and the word in the number it takes: "1 file", "3 batches"."""
    return f"{n:,} {_plural(n, word)}"


def _delta(facts: Any) -> str:
    if facts is None:
        return '<span class="muted">none yet</span>'
    return (f'<span data-rows="{facts.rows}">{facts.rows:,}</span> rows, version {facts.version}, '
            f"{_counted(facts.files, 'file')}, {_size(facts.bytes)}")


def _events(table: TableView) -> str:
    if not table.events:
        return '<span class="muted">none</span>'
    return "<br>".join(f'<span data-event="{_e(e.kind)}">{_e(e.kind)}</span>: <code>{_e(e.statement)}</code> '
                       f'<span class="muted">at {_e(e.at)}</span>' for e in table.events)


def _tables(status: LakeStatus, airflow_root: str, dags: dict[str, str]) -> str:
    rows = []
    for t in status.tables:
        counts = t.chunk_counts()
        merged = ("" if t.merged_through is None else " (no change merged yet)" if t.merged_through < 0
                  else f" (merged through stream batch {t.merged_through})")
        rows.append(
            f'<tr data-table="{_e(t.table)}" data-chunks="{len(t.chunks)}" data-chunks-done="{counts["done"]}">'
            f'<td><b>{_e(t.table)}</b><br><span class="muted" data-field="state">{_e(t.state)}</span></td>'
            f"<td>{_chunk_picture(t)}</td><td>{_delta(t.current)}{merged}</td><td>{_delta(t.changelog)}</td>"
            f"<td>{_verification(t, airflow_root, dags)}</td><td>{_events(t)}</td></tr>")
    if not rows:
        return '<p class="muted">No table of this selection in the lake yet.</p>'
    legend = "".join(f'<span><span class="chunk" style="background:{c}"></span> {s}</span>' for s, c in _COLORS.items())
    return (f'<div class="legend muted">{legend}</div><table><tr><th>Table</th><th>Snapshot</th>'
            f"<th>Current table</th><th>Changelog</th><th>Verification</th><th>Table events</th></tr>"
            f'{"".join(rows)}</table>')


def _time(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def chart(history: list[CommitPoint], width: int = 720, height: int = 170) -> str:
    """The stream's lag (a line, seconds) at its commits and its rows/s (bars, per interval), as inline SVG."""
    if not history:
        return '<p class="muted">No stream commit in the last hours.</p>'
    times = [_time(p.committed_at) for p in history]
    start, end = min(times), max(times)
    bucket = max(10.0, (end - start) / 60)  # seconds a bar sums: at most about 60 bars
    end = max(end, start + bucket) + bucket
    left, right, top, bottom = 48, width - 48, 12, height - 24

    def x(t: float) -> float:
        return left + (t - start) / (end - start) * (right - left)

    buckets: dict[int, int] = {}
    for t, p in zip(times, history, strict=True):
        buckets[int((t - start) // bucket)] = buckets.get(int((t - start) // bucket), 0) + p.rows
    top_rate = max(max(buckets.values()) / bucket, 1e-9)
    lags = [(t, p.lag_seconds) for t, p in zip(times, history, strict=True) if p.lag_seconds is not None]
    top_lag = max([lag for _, lag in lags] + [1.0])
    bar = max(2.0, bucket / (end - start) * (right - left) - 1)

    def height_of(rows: int) -> float:
        return rows / bucket / top_rate * (bottom - top)

    bars = "".join(
        f'<rect x="{x(start + b * bucket):.1f}" y="{bottom - height_of(rows):.1f}" width="{bar:.1f}" '
        f'height="{height_of(rows):.1f}" fill="#90caf9"><title>{rows / bucket:,.1f} rows/s</title></rect>'
        for b, rows in sorted(buckets.items()))
    line = " ".join(f"{x(t):.1f},{bottom - lag / top_lag * (bottom - top):.1f}" for t, lag in lags)
    label = dt.datetime.fromtimestamp
    return (
        f'<svg width="{width}" height="{height}" role="img" data-field="chart" data-points="{len(history)}">'
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="#fafafa" stroke="#e0e0e0"/>'
        f"{bars}"
        f'<polyline points="{line}" fill="none" stroke="#e65100" stroke-width="2"/>'
        f'<text x="4" y="{top + 10}" font-size="11" fill="#e65100">{top_lag:,.1f} s</text>'
        f'<text x="4" y="{bottom}" font-size="11" fill="#e65100">0 s</text>'
        f'<text x="{right + 4}" y="{top + 10}" font-size="11" fill="#1565c0">{top_rate:,.0f}/s</text>'
        f'<text x="{left}" y="{height - 6}" font-size="11">{label(start, dt.UTC):%H:%M:%S}</text>'
        f'<text x="{right - 56}" y="{height - 6}" font-size="11">{label(end, dt.UTC):%H:%M:%S} UTC</text>'
        f"</svg><div class=\"muted\"><span style=\"color:#e65100\">lag (s)</span> at each commit, "
        f"<span style=\"color:#1565c0\">rows/s</span> per {bucket:,.0f} s</div>")


def _task_log_link(airflow_root: str, status: DagStatus, task: TaskState | None) -> str:
    """A link to the task instance in Airflow, where its log says why, when the task failed; else nothing."""
    if task is None or status.run_id is None or task.state not in _FAILED_TASK_STATES:
        return ""
    href = (f"{airflow_root}/dags/{quote(status.dag_id, safe='')}/runs/{quote(status.run_id, safe='')}"
            f"/tasks/{quote(task.task_id, safe='')}{f'/mapped/{task.map_index}' if task.map_index >= 0 else ''}")
    return f' (<a href="{_e(href)}" target="_top" data-field="stream-log">its log says why</a>)'


def _margin(margin: MarginView | None) -> str:
    """The binlog margin at the last check, and how old that check is."""
    if margin is None:
        return '<span class="muted" data-field="binlog-margin">not measured yet</span>'
    if margin.limited_by == MarginLimit.PURGED:
        figure = f"none: binlog file {_e(margin.file)} is purged"
    elif margin.seconds is None:
        figure = "not purged (no retention by age or size)"
    else:
        figure = duration(margin.seconds)
        if margin.warn_below_seconds is not None:
            figure += f" (warns below {duration(margin.warn_below_seconds)})"
    by = "the split task" if margin.checked_by == "split" else f"the {_e(margin.checked_by)}"
    style = ' class="bad"' if margin.below else ""
    return (f'<span data-field="binlog-margin" data-value="{margin.seconds}" data-limited-by="{_e(margin.limited_by)}" '
            f'data-below="{str(margin.below).lower()}" data-age-seconds="{margin.age_seconds}"{style}>{figure}</span> '
            f'<span class="muted" data-field="binlog-margin-age">measured {duration(margin.age_seconds)} ago by {by} '
            f"({_e(margin.measured_at)}), binlog file {_e(margin.file)}, {_size(margin.behind_bytes)} of binlog "
            f"behind</span>")


def _stream(stream: StreamView | None, task: TaskState | None, log_link: str = "") -> str:
    state = task.state if task is not None else None
    if stream is None:
        return (f'<p class="muted">The stream has not committed yet'
                f'{f" (its task is {_e(state)})" if state else ""}{log_link}.</p>')
    lease = (f"{_e(stream.lease_holder)} (until {_e(stream.lease_valid_until)})" if stream.lease_held
             else f'<span class="muted">released (last: {_e(stream.lease_holder)})</span>')
    lag = f"{stream.lag_seconds:,.1f} s" if stream.lag_seconds is not None else "n/a"
    facts = [
        ("State", f'<span data-field="stream-state">{_e(state or "unknown")}</span>'
                  f'{f" (try {task.try_number})" if task is not None else ""}{log_link}'),
        ("Offset", f'<code data-field="offset">{_e(stream.offset)}</code>'),
        ("GTID", f'<code data-field="gtid">{_e(stream.gtid or "none")}</code>'),
        ("Lag at the last commit", f'<span data-field="lag-seconds" data-value="{stream.lag_seconds}">{lag}</span>'),
        ("Binlog margin", _margin(stream.binlog_margin)),
        ("Last commit", f'<span data-field="last-commit">{_e(stream.last_commit)}</span> (batch {stream.seq})'),
        ("Rows/s (last 5 min)", f'<span data-field="rows-per-second">{stream.rows_per_second:,.1f}</span>'),
        ("Lease", lease),
    ]
    rows = "".join(f"<tr><td>{name}</td><td>{value}</td></tr>" for name, value in facts)
    return f'<table class="facts">{rows}</table>{chart(stream.history)}'


def _run_link(airflow_root: str, status: DagStatus) -> str:
    if status.run_id is None:
        return '<p class="muted">This DAG has no run yet.</p>'
    href = f"{airflow_root}/dags/{quote(status.dag_id, safe='')}/runs/{quote(status.run_id, safe='')}"
    tables = (f" · tables of {'task ' + _e(status.task_id) if status.task_id else 'this run'}: "
              f"{_e(', '.join(status.tables))}" if status.tables else "")
    return (f'<p>Run <a href="{_e(href)}" target="_top" data-field="run">{_e(status.run_id)}</a> '
            f'({_e(status.run_state or "unknown")}){tables}</p>')


def render_dag(status: DagStatus, airflow_root: str, json_href: str) -> str:
    """The page of one DAG (at one run); ``json_href``: the same as JSON."""
    parts = [_run_link(airflow_root, status)]
    if status.run_id is not None and not status.lakes:
        parts.append('<p class="muted">No task of this run has rendered a MySQL CDC lake (base_uri) yet.</p>')
    for report in status.lakes:
        parts.append(f'<section data-lake="{_e(report.lake.base_uri)}"><h2>Lake <code>{_e(report.lake.base_uri)}'
                     f"</code></h2>")
        if report.error is not None:
            parts.append(f'<p class="bad" data-field="error">The lake could not be read: {_e(report.error)}</p>')
        elif report.status is not None:
            log_link = _task_log_link(airflow_root, status, report.stream_task)
            parts.append(f"<h3>Stream</h3>{_stream(report.status.stream, report.stream_task, log_link)}")
            parts.append(f"<h3>Tables</h3>{_tables(report.status, airflow_root, status.verification_dags)}")
        parts.append("</section>")
    parts.append(f'<p class="muted">The same data as <a href="{_e(json_href)}" data-field="json">JSON</a>; this page '
                 f"reloads every {REFRESH_SECONDS} s.</p>")
    return _document(f"MySQL CDC: {status.dag_id}", "".join(parts), refresh=True)


def render_index(dag_ids: list[str], prefix: str) -> str:
    """The nav entry's page: the DAGs the user may read that ran a task of this package."""
    if not dag_ids:
        body = '<p class="muted">No DAG you may read has run a MySQL CDC task yet.</p>'
    else:
        items = "".join(f'<li><a href="{_e(prefix)}/dags/{quote(d, safe="")}" data-dag="{_e(d)}">{_e(d)}</a></li>'
                        for d in dag_ids)
        body = f"<ul>{items}</ul>"
    return _document("MySQL CDC", body)


def _document(title: str, body: str, refresh: bool = False) -> str:
    meta = f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">' if refresh else ""
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return (f'<!doctype html><html><head><meta charset="utf-8">{meta}<title>{_e(title)}</title>'
            f"<style>{_STYLE}</style></head><body><h1>{_e(title)}</h1>{body}"
            f'<p class="muted">As of <span data-field="as-of">{stamp}</span>.</p></body></html>')
