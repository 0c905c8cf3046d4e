"""The table format: what the pipeline asks of a replica table (``table_format``), its one implementation in
Delta Lake (``delta_table``, with ``delta_log`` for the appends it commits by a log entry of its own), and
what a table's two Delta tables hold, with the types Delta lacks (``delta_schema``)."""
