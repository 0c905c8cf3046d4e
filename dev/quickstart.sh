#!/usr/bin/env bash
# README's first command: set the machine up, start a local MariaDB (port 33061, data in .local/)
# with the sample shop database, and run the job on the embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
./dev/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/python -m dev.quickstart "$@"
