#!/usr/bin/env bash
# Sets up a development machine from a clean clone: Debian packages (MariaDB server and client,
# Java for Spark, chromium for the UI screenshot), and a virtualenv in .venv with the package (Spark
# included: pyspark's jars and spark-submit come with its dependencies) and its test extras.
# Idempotent: a second run only checks. Needs root (or sudo) for apt-get on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need_apt+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || need_apt+=(mariadb-client)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
[ -f /usr/share/java/mariadb-java-client.jar ] || need_apt+=(libmariadb-java)  # the Spark JDBC baseline in bench/
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
# headless chromium: tests/deployment screenshots the Airflow UI served by the deployment's api-server
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "==> apt-get install ${need_apt[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
if ! .venv/bin/python -c 'import airflow_provider_mysqlcdc' >/dev/null 2>&1 \
   || [ pyproject.toml -nt .venv/.installed ]; then
  echo "==> pip install -e .[test] (a cold install takes a few minutes)"
  if ! .venv/bin/pip install -e ".[test]" >.venv/pip-install.log 2>&1; then
    tail -n 40 .venv/pip-install.log; echo "pip install failed; full log in .venv/pip-install.log" >&2; exit 1
  fi
  touch .venv/.installed
fi
echo "==> setup done"
