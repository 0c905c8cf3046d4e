"""Reading the replica back, committed data only: what a reader may take of a table (``committed``), the
current table streamed past the changed keys (``current_scan``), ``read_table``/``read_changes``/``scan_table``
(``replica``), the as-of read (``as_of_read``), Spark views (``spark_views``) and the stream's commits as a
reader outside the stream sees them (``stream_commits``)."""
