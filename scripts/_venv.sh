# Shared by scripts/demo and scripts/test (sourced, not run): a project virtual environment in .venv,
# made with the machine's python3, and Debian packages installed only when they are missing.

# Run a command as root: directly when we are root, else through sudo.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# apt-get install the Debian packages named that are not installed yet (one apt-get update first).
need_debian_packages() {
    missing=""
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing="$missing $package"
    done
    [ -z "$missing" ] && return 0
    echo "npuwatch: installing Debian packages:$missing" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    # shellcheck disable=SC2086 # one word per package
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
}

# .venv with pip, made once; Debian's python3 needs python3-venv for that.
make_venv() {
    if [ ! -x .venv/bin/python ]; then
        if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
            need_debian_packages python3-venv
        fi
        python3 -m venv .venv
    fi
    VENV_PYTHON="$PWD/.venv/bin/python"
}
