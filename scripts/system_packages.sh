#!/usr/bin/env bash
# The system tools `make test` needs beside Python's packages, from Debian's (or Ubuntu's) packages: each one
# missing is installed with apt-get when this runs as root, else this prints the one apt-get line to run and
# fails. Those present are left alone. Usage: scripts/system_packages.sh [PYTHON]
set -euo pipefail
PYTHON=${1:-python3}
missing=()

# need PACKAGE CHECK...: PACKAGE is installed when the command CHECK fails
need() {
    local package=$1
    shift
    "$@" >/dev/null 2>&1 || missing+=("$package")
}

has() { command -v "$1"; }

# `make setup`'s virtualenvs; eflomal (mt clean's word alignment) builds against Python's headers with a C compiler
need python3-venv "$PYTHON" -c "import ensurepip, venv"
need python3-dev "$PYTHON" -c "import os, sysconfig; assert os.path.exists(sysconfig.get_paths()['include'] + '/Python.h')"
need build-essential has cc
# the web pages' tests drive headless chromium through chromedriver (tests/chromium.py)
need chromium test -x /usr/bin/chromium
need chromium-driver test -x /usr/bin/chromedriver
# the browser example's transformers.js comes from the npm registry (examples/browser)
need nodejs has node
need npm has npm
# the localization tests check mt's PO files with GNU gettext's msgfmt, its Qt files with Qt's lrelease
need gettext has msgfmt
need qt6-l10n-tools test -x /usr/lib/qt6/bin/lrelease

[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && has apt-get >/dev/null; then
    log=$(mktemp -t mt-apt.XXXXXX)
    echo "make: installing the system packages the tests need: ${missing[*]} (apt-get's output: $log)"
    if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"; } >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        echo "error: apt-get install ${missing[*]} failed (its whole output: $log)" >&2
        exit 1
    fi
else
    echo "error: make test needs system packages ${missing[*]}: run 'sudo apt-get install -y ${missing[*]}'" >&2
    exit 1
fi
