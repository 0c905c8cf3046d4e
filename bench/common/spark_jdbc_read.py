"""The baseline of the snapshot benchmarks (``example_dag.run_jdbc_baseline``): Spark's own JDBC read of a
table into Parquet, nothing else.

    spark-submit --jars /usr/share/java/mariadb-java-client.jar spark_jdbc_read.py \\
        --url jdbc:mysql://127.0.0.1:3306/bench --table orders --user cdc --out /tmp/jdbc

The password comes from MYSQL_CDC_PASSWORD. Uses a jdbc:mysql:// URL with MariaDB's driver class
(with jdbc:mariadb:// Spark quotes columns with double quotes and the reads fail).
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("--url", "--table", "--user", "--out", "--key"):
        parser.add_argument(name, required=name != "--key", default="id")
    args = parser.parse_args(argv)
    spark = SparkSession.builder.appName("jdbc baseline").getOrCreate()
    options = {"url": args.url, "dbtable": args.table, "user": args.user,
               "password": os.environ.get("MYSQL_CDC_PASSWORD", ""), "driver": "org.mariadb.jdbc.Driver"}
    bounds = spark.read.format("jdbc").options(
        **{**options, "dbtable": f"(SELECT MIN({args.key}) lo, MAX({args.key}) hi FROM {args.table}) b"}
    ).load().first()
    started = time.monotonic()
    frame = spark.read.format("jdbc").options(
        **options, partitionColumn=args.key, lowerBound=str(bounds.lo), upperBound=str(bounds.hi),
        numPartitions=str(2 * spark.sparkContext.defaultParallelism), fetchsize="10000",
    ).load()
    frame.write.mode("overwrite").parquet(args.out)
    seconds = time.monotonic() - started
    rows = spark.read.parquet(args.out).count()
    print(f"JDBC_BASELINE rows={rows} seconds={seconds:.3f}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
