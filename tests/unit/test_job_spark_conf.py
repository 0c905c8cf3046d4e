"""Our jobs' Spark settings (``operators.spark_submit.job_spark_conf``) as ``spark-submit`` gets them: the
driver's Java options are one argument holding the log4j2 file and the quick compiler."""

from __future__ import annotations

from pathlib import Path

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_provider_mysqlcdc.operators.spark_submit import job_spark_conf


def command(conf: dict[str, str]) -> list[str]:
    return SparkSubmitHook(conf=conf)._build_spark_submit_command("job.py")


def test_the_driver_jvm_gets_the_log4j2_file_and_the_quick_compiler_in_one_argument() -> None:
    built = command(job_spark_conf())
    (options,) = [a for a in built if a.startswith("spark.driver.extraJavaOptions=")]
    log4j, jit = options.removeprefix("spark.driver.extraJavaOptions=").split(" ")
    assert Path(log4j.removeprefix("-Dlog4j2.configurationFile=file:")).is_file()
    assert jit == "-XX:TieredStopAtLevel=1"
    assert "spark.log.level=WARN" in built

