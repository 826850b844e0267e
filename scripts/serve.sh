#!/usr/bin/env bash
# Installs Streamscope and serves the web app on http://127.0.0.1:8050 with the sample runs preloaded.
# Extra arguments go to `streamscope serve` (e.g. --port 9000 --data ./my-runs).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python_env.sh
python3 -m pip install -q -e .
exec streamscope serve "$@"
