#!/usr/bin/env bash
# Runs the whole test suite (unit, integration against a throwaway MariaDB, lint and types).
# Sets the machine up first if needed (dev/setup.sh is idempotent). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./dev/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/python -m pytest "$@"
