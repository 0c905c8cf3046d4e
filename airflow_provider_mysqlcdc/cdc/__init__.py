"""The engine-free CDC core: no Airflow or Spark imports, so every other layer can call it."""
