"""The engine loops, between the CDC core (``cdc/``) and the operators: the stream runner (startup,
the captured tables, the batch loop, stop conditions). Operators, tests and benchmarks drive these;
``lake/`` only stores and reads. No Airflow here."""
