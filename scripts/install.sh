#!/bin/sh
# Install npuwatch from an offline bundle (built by scripts/offline_bundle.py): no network needed.
#
#   sudo ./install.sh            # /opt/npuwatch, user npuwatch, /var/lib/npuwatch, /etc/npuwatch/config.yaml
#
# PREFIX moves the virtual environment; DESTDIR puts every system path (/etc, /var, the unit) under a
# staging root and skips creating the user and reloading systemd (for packaging, and for the tests).
# Runs again safely: an existing config is kept, the venv is upgraded in place. A new config is the
# example with no example value set; expected_chips is what `npu-smi info` lists (NPU_SMI=PATH names it).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-/opt/npuwatch}
DESTDIR=${DESTDIR:-}
PYTHON=${PYTHON:-python3}

say() { echo "npuwatch install: $*" >&2; }

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 9))' || {
    say "$PYTHON is older than 3.9; install a newer python3 (CANN's OS list: see the README)"; exit 1; }
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || {
    say "$PYTHON has no venv module: install python3-venv (Debian/Ubuntu) or python3 (openEuler) first"; exit 1; }

say "creating $PREFIX"
"$PYTHON" -m venv "$PREFIX"
# Only the bundle's wheels: no index is consulted, whatever pip.conf says.
PIP_CONFIG_FILE=/dev/null "$PREFIX/bin/python" -m pip install --quiet --no-index --find-links "$here/wheels" \
    --upgrade npuwatch bcrypt

if [ -z "$DESTDIR" ]; then
    if ! id npuwatch >/dev/null 2>&1; then
        groups=""
        getent group HwHiAiUser >/dev/null 2>&1 && groups="--groups HwHiAiUser"
        say "creating system user npuwatch"
        # shellcheck disable=SC2086 # optional flag pair
        useradd --system --no-create-home --shell /usr/sbin/nologin $groups npuwatch
    fi
else
    say "DESTDIR set: not creating the npuwatch user"
fi

install -d -m 0750 "$DESTDIR/var/lib/npuwatch"
[ -z "$DESTDIR" ] && chown npuwatch: "$DESTDIR/var/lib/npuwatch"
install -d "$DESTDIR/etc/npuwatch"
if [ -e "$DESTDIR/etc/npuwatch/config.yaml" ]; then
    say "keeping $DESTDIR/etc/npuwatch/config.yaml"
else
    # The example with no example value switched on, and expected_chips from `npu-smi info` when it
    # answers (NPU_SMI names it; else PATH and the Ascend locations); left at 0 (unknown) otherwise.
    # shellcheck disable=SC2086 # optional flag pair
    "$PREFIX/bin/python" -m agent.core.live_config ${NPU_SMI:+--npu-smi "$NPU_SMI"} \
        "$here/config.example.yaml" "$DESTDIR/etc/npuwatch/config.yaml"
fi
"$PREFIX/bin/npuwatch" check-config "$DESTDIR/etc/npuwatch/config.yaml"

install -d "$DESTDIR/etc/systemd/system"
sed "s#/opt/npuwatch/bin/npuwatch#$PREFIX/bin/npuwatch#g" "$here/npuwatch.service" \
    > "$DESTDIR/etc/systemd/system/npuwatch.service"
if [ -z "$DESTDIR" ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload || true
    say "installed; start it with: systemctl enable --now npuwatch"
else
    say "installed under ${DESTDIR:-/}"
fi
