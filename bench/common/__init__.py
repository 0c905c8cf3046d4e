"""What the benchmarks share, so that no benchmark imports another: a throwaway MariaDB and its tables
(``server``), the measurements besides wall time (``measure``), RESULTS.md's sections (``results``), two
commits' trees side by side in child processes (``two_commits``), stream batches and Delta rows made
without a server (``lake_batches``, ``delta_rows``), the example DAG's snapshot and Spark's JDBC read
(``example_dag``), and the programs the benchmarks start as processes of their own (``stream_child``,
``stream_spread``, ``spark_jdbc_read``)."""
