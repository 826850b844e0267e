# Sourced by serve.sh and test.sh from the repository root: where python3 is externally managed, use .venv.
# PEP 668: a python3 whose packages the OS manages (stock Debian, Ubuntu) refuses `pip install` outside a
# virtual environment. There, and only there, install into the checkout's own .venv (git-ignored).
pip_refuses_system_installs() {
    python3 -c 'import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(sys.prefix != sys.base_prefix or not os.path.exists(marker))' || return 1
    local probe  # pip itself decides: it installs anyway where it is configured to break system packages
    probe=$(python3 -m pip install --dry-run --no-index --no-deps -q pip 2>&1) || true
    [[ $probe == *externally-managed* ]]
}
if pip_refuses_system_installs; then
    echo "$(basename "$0"): python3 is externally managed (PEP 668): installing into .venv (. .venv/bin/activate to use it)"
    if ! { [ -x .venv/bin/python3 ] && .venv/bin/python3 -m pip --version >/dev/null 2>&1; }; then
        rm -rf .venv
        # without Debian's python3-venv (no ensurepip) the system's pip installs into the environment
        python3 -m venv .venv >/dev/null 2>&1 || { rm -rf .venv && python3 -m venv --without-pip --system-site-packages .venv; }
        .venv/bin/python3 -m pip --version >/dev/null 2>&1 || {
            echo "$(basename "$0"): no pip for .venv: install python3-venv (apt-get install python3-venv)" >&2
            exit 1
        }
    fi
    export VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH"
fi
