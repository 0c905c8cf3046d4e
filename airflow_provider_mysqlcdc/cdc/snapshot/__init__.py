"""Reading a chunk: one session with the source, the watermarks around a chunk's SELECT (into Arrow),
and the binlog between them applied to its rows.
"""
