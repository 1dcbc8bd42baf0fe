#!/usr/bin/env bash
# Maintainers only: refresh the vendored onnxruntime C API header in third_party/onnxruntime/ (builds never run
# this; they use the committed copy, so an sdist builds on any host, with or without apt).
#
# The header comes from Debian's libonnxruntime-dev package of the given suite (apt-get download with a private
# sources list + dpkg -x: nothing is installed), the license text from the onnxruntime wheel on PyPI. Needs
# apt-get, dpkg-deb and pip (a Debian-family host). Without apt: copy include/onnxruntime/core/session/
# onnxruntime_c_api.h of the onnxruntime release tag by hand and update VERSION the same way.
#
# Usage: tools/refresh_ort_headers.sh [SUITE]      (default: trixie -> onnxruntime 1.21.0, ORT_API_VERSION 21)
# Afterwards: rebuild, run the whole suite and the onnxruntime matrix (make ort-matrix), and update README.md's
# "Supported onnxruntime versions" if the API version changed.
set -euo pipefail
suite=${1:-trixie}
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/third_party/onnxruntime
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/x"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
if [ -f "$keyring" ]; then
  echo "deb [signed-by=$keyring] http://deb.debian.org/debian $suite main" > "$work/sources.list"
else
  echo "deb [trusted=yes] http://deb.debian.org/debian $suite main" > "$work/sources.list"
fi
o=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$work/lists"
   -o Dir::Cache="$work/cache" -o Debug::NoLocking=1)
apt-get "${o[@]}" update >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
(cd "$work" && apt-get "${o[@]}" download libonnxruntime-dev >>"$work/apt.log" 2>&1) || { cat "$work/apt.log" >&2; exit 1; }
deb=$(ls "$work"/libonnxruntime-dev_*.deb)
pkgver=$(dpkg-deb -f "$deb" Version)
dpkg-deb -x "$deb" "$work/x"
header=$work/x/usr/include/onnxruntime/onnxruntime_c_api.h
# The vendored header must stand alone: only C standard headers (and a Windows-only SAL header) may be included.
extra=$(grep -E '^\s*#\s*include' "$header" | grep -vE '<(stdbool|stdint|stdlib|string|specstrings)\.h>' || true)
if [ -n "$extra" ]; then
  echo "onnxruntime_c_api.h now includes more than C standard headers; vendor those too:" >&2
  echo "$extra" >&2
  exit 1
fi
upstream=${pkgver%%+*}
upstream=${upstream%%-*}
api=$(sed -n 's/^#define ORT_API_VERSION \([0-9]*\).*/\1/p' "$header")
pip download -q --no-deps --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 \
  -d "$work/whl" "onnxruntime==$upstream"
python3 - "$work/whl" "$work/LICENSE" <<'PY'
import sys, zipfile, pathlib
whl = next(pathlib.Path(sys.argv[1]).glob("onnxruntime-*.whl"))
with zipfile.ZipFile(whl) as z:
    pathlib.Path(sys.argv[2]).write_bytes(z.read("onnxruntime/LICENSE"))
PY
mkdir -p "$dest/include"
cp "$header" "$dest/include/onnxruntime_c_api.h"
cp "$work/LICENSE" "$dest/LICENSE"
cat > "$dest/VERSION" <<TXT
onnxruntime $upstream (ORT_API_VERSION $api)
header: include/onnxruntime_c_api.h = upstream include/onnxruntime/core/session/onnxruntime_c_api.h,
        taken from Debian $suite libonnxruntime-dev $pkgver
sha256: $(sha256sum "$dest/include/onnxruntime_c_api.h" | cut -d' ' -f1)
license: LICENSE (MIT), from the onnxruntime $upstream wheel on PyPI
refresh: tools/refresh_ort_headers.sh [debian-suite]
TXT
echo "refreshed $dest: onnxruntime $upstream, ORT_API_VERSION $api" >&2
