#!/usr/bin/env bash
# Fetch the onnxruntime C/C++ API headers (API version 21) from Debian trixie's libonnxruntime-dev package
# without installing anything: apt-get download with a private sources list and lists dir, then dpkg -x.
# Usage: tools/fetch_ort_headers.sh DEST   -> headers end up in DEST/include/onnxruntime/
set -euo pipefail
dest=${1:?usage: fetch_ort_headers.sh DEST}
if [ -f "$dest/include/onnxruntime/onnxruntime_c_api.h" ]; then
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/root"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
if [ -f "$keyring" ]; then
  echo "deb [signed-by=$keyring] http://deb.debian.org/debian trixie main" > "$work/sources.list"
else
  echo "deb [trusted=yes] http://deb.debian.org/debian trixie main" > "$work/sources.list"
fi
o=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$work/lists"
   -o Dir::Cache="$work/cache" -o Debug::NoLocking=1)
apt-get "${o[@]}" update >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
(cd "$work" && apt-get "${o[@]}" download libonnxruntime-dev >>"$work/apt.log" 2>&1) || { cat "$work/apt.log" >&2; exit 1; }
dpkg -x "$work"/libonnxruntime-dev_*.deb "$work/root"
mkdir -p "$dest/include"
rm -rf "$dest/include/onnxruntime"
cp -r "$work/root/usr/include/onnxruntime" "$dest/include/onnxruntime"
echo "fetched onnxruntime headers into $dest/include/onnxruntime" >&2
