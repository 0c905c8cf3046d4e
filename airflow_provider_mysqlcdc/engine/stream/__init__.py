"""The stream: the runner (``stream_runner``: startup, checkpoint, run until a stop condition or a wait), the
binlog cut into committed batches (``stream_batches``), the captured tables and their DDLs
(``captured_tables``, ``schema_changes``, ``schema_self_check``), the MERGE and upkeep after commits
(``state_merge``, ``table_upkeep``), what it reports (``stream_observer``) and the trigger's test for new
changes (``change_watch``)."""
