"""Writing the replica: a snapshot batch's commit (``snapshot_commit``), the stream's commit of its changelog
rows and checkpoint (``stream_commit``), the MERGE into the current tables (``merge``, ``multiset`` for the
tables without a key), a DDL applied to a current table (``current_ddl``), maintenance, and the lease that
keeps one stream writer per lake."""
