"""The snapshot: its plan (``snapshot_plan``: source checks, tables, chunks, batches), the batches one mapped
task reads (``jobs``) and their binlog server ids (``batch_readers``), and a batch's chunks read into
Parquet and committed (``snapshot_batch``, with ``read_ahead`` reading the next chunks meanwhile)."""
