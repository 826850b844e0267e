#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine (Chromium, torch CPU, the [test] extra), checks
# lint and types, then runs the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python_env.sh
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
if [ ! -x /usr/bin/chromium ]; then
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq chromium >/dev/null
fi
# torch's CPU build (PyPI's Linux torch is the CUDA build, several GB): a local copy of the wheel where pip's
# find-links has one, else PyTorch's CPU index.
python3 -c "import torch" 2>/dev/null || python3 -m pip install -q "torch==2.13.0+cpu" 2>/dev/null \
    || python3 -m pip install -q "torch==2.13.0+cpu" --extra-index-url https://download.pytorch.org/whl/cpu
python3 -m pip install -q -e ".[test]"
# Ray (the [ray] extra, ~70 MB from the index) only when asked: STREAMSCOPE_TEST_RAY=1 scripts/test.sh.
# Without it the local-Ray test is skipped; the process-pool path is always tested.
if [ "${STREAMSCOPE_TEST_RAY:-0}" = "1" ]; then python3 -m pip install -q -e ".[ray]"; fi
ruff check .
ruff format --check .
mypy
python3 -m pytest "$@"
