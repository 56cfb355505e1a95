#!/usr/bin/env bash
# `cmake --install BUILD --component python` into a staging DESTDIR: the package lands in the
# folder Debian's python3 searches for the install prefix (/usr/local/lib/python3.X/dist-packages
# or /usr/lib/python3/dist-packages), and imports from there with the command's version.
# Usage: install_test.sh PYTHON BUILD_DIR PREFIX INSTALL_DIR BITSIM_BINARY
set -euo pipefail
python="$1" build="$2" prefix="$3" dir="$4" binary="$5"
stage="$(cd "$build" && pwd)/install-test"
rm -rf "$stage"
DESTDIR="$stage" cmake --install "$build" --component python >/dev/null
site="$prefix/$dir"
"$python" - "$site" <<'PY'
import sys
site = sys.argv[1]
if site not in sys.path:
    sys.exit(f"{site} is not on Debian's python3 path: {sys.path}")
PY
version="$(cd / && PYTHONPATH="$stage$site" "$python" -c 'import bitsim, sys; assert bitsim.__file__.startswith(sys.argv[1]); print(bitsim.__version__)' "$stage$site")"
[[ "bitsim $version" == "$("$binary" --version)" ]] || { echo "installed $version, the command: $("$binary" --version)"; exit 1; }
echo "installed into $site (bitsim $version)"
