"""The engine loops, between the CDC core (``cdc/``) and the operators: a snapshot batch (its columns,
chunks into Parquet, commit) and the stream runner (startup, the captured tables, the batch loop,
stop conditions). Operators, the Spark application, tests and benchmarks drive these; ``lake/`` only
stores and reads. No Airflow here."""
