#!/usr/bin/env bash
# Builds XGrammar's C++ core (the structured-output grammar engine, see
# common/grammar/) as a static library from the pinned PyPI sdist
# xgrammar==0.2.9 (sha256 checked) and installs headers + libxgrammar.a into
# a cache folder outside the repository (nothing of it is committed):
#
#   ${PDSERVE_CACHE:-~/.cache/pdserve}/xgrammar-0.2.9/install/{include,lib}
#
# include/ holds xgrammar/*.h and dlpack/dlpack.h (the only third-party header
# the public headers include; picojson is used by the sources only). The
# library needs nothing but -pthread at link time.
#
# Idempotent: when the stamp matches, it only prints the prefix. The install
# prefix is the last line on stdout; all logs go to stderr. ~1.5 min at -j1 on
# 2 cores for a first build (about 650 MB RSS per compile job).
#
#   prefix="$(scripts/build-xgrammar.sh)"   # JOBS=2 to build with two jobs
set -euo pipefail

VERSION=0.2.9
SHA256=87b466bca2475e29bb0323abc62c6c33cbcbcff47e5fb800a3e2099ac9620b90
CACHE_DIR="${PDSERVE_CACHE:-$HOME/.cache/pdserve}/xgrammar-$VERSION"
SDIST="$CACHE_DIR/xgrammar-$VERSION.tar.gz"
PREFIX="$CACHE_DIR/install"
# One job by default: each compile job peaks near 650 MB RSS; JOBS=N overrides.
JOBS="${JOBS:-1}"
# Upstream's CMakeLists prepends "-Wall -Wextra -Werror ... -flto=auto" to
# CMAKE_CXX_FLAGS, so ours come later on the command line and win:
# -fno-lto: a slim-LTO .a holds GCC bytecode only, and every consumer link
#   then re-runs the optimiser (+29 s per link measured);
# -Wno-error: a third-party warning under a newer compiler must not fail setup.
CXX_FLAGS="-fno-lto -Wno-error"
# Bump when the flags or the install layout change: the stamp must then differ.
STAMP_TEXT="xgrammar $VERSION sha256=$SHA256 flags=$CXX_FLAGS layout=1"
STAMP="$PREFIX/.pdserve-stamp"

stamp_ok() {
  [[ -f "$PREFIX/lib/libxgrammar.a" && -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$STAMP_TEXT" ]]
}
if stamp_ok; then
  echo "$PREFIX"
  exit 0
fi

mkdir -p "$CACHE_DIR"
# Two setups at once (e.g. make setup in two shells) would race on the files.
exec 9>"$CACHE_DIR/.lock"
flock 9
if stamp_ok; then  # the other one finished it while we waited
  echo "$PREFIX"
  exit 0
fi

if [[ ! -f "$SDIST" ]] || ! echo "$SHA256  $SDIST" | sha256sum -c --quiet - 2>/dev/null; then
  echo "build-xgrammar: downloading the xgrammar==$VERSION sdist" >&2
  # --no-binary xgrammar, not :all:, which would make pip build the build
  # requirements (apache-tvm-ffi, and CMake itself) from source.
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-binary xgrammar --dest "$CACHE_DIR" "xgrammar==$VERSION" >&2
  echo "$SHA256  $SDIST" | sha256sum -c --quiet - || { rm -f "$SDIST"; exit 1; }
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$SDIST" -C "$tmp"
src="$tmp/xgrammar-$VERSION"
build="$tmp/build"
mkdir -p "$build"
# The sdist's cmake/config.cmake sets XGRAMMAR_BUILD_PYTHON_BINDINGS ON and
# overrides -D on the command line (configure then looks for tvm_ffi); a
# config.cmake in the build folder is read instead of it.
cat >"$build/config.cmake" <<'EOF'
set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)
set(XGRAMMAR_BUILD_CXX_TESTS OFF)
set(XGRAMMAR_ENABLE_CPPTRACE OFF)
set(XGRAMMAR_ENABLE_COVERAGE OFF)
set(XGRAMMAR_ENABLE_INTERNAL_CHECK OFF)
EOF

echo "build-xgrammar: building libxgrammar.a (-j$JOBS)" >&2
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$CXX_FLAGS" -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_LIBDIR=lib >&2
ninja -C "$build" -j "$JOBS" xgrammar >&2

lib="$build/libxgrammar.a"
# Guard against LTO slipping back in (e.g. a new upstream flag): GCC LTO
# objects carry .gnu.lto_ sections instead of machine code.
if objdump -h "$lib" 2>/dev/null | grep -q '\.gnu\.lto_'; then
  echo "build-xgrammar: $lib holds LTO bytecode; -fno-lto did not take" >&2
  exit 1
fi

# Install into a fresh folder, then swap it in, so a failed run never leaves a
# half-installed prefix that a stale stamp could vouch for.
rm -rf "$PREFIX.new"
cmake --install "$build" --prefix "$PREFIX.new" >&2
mkdir -p "$PREFIX.new/share/licenses/xgrammar"
cp "$src/LICENSE" "$src/NOTICE" "$PREFIX.new/share/licenses/xgrammar/"
cp "$src/3rdparty/dlpack/LICENSE" "$PREFIX.new/share/licenses/xgrammar/LICENSE.dlpack"
# picojson ships no LICENSE file: its BSD-2 notice is the header's first comment.
sed -n '1,/\*\//p' "$src/3rdparty/picojson/picojson.h" \
  >"$PREFIX.new/share/licenses/xgrammar/LICENSE.picojson"
[[ -f "$PREFIX.new/lib/libxgrammar.a" && -f "$PREFIX.new/include/xgrammar/xgrammar.h" \
   && -f "$PREFIX.new/include/dlpack/dlpack.h" ]] \
  || { echo "build-xgrammar: install is missing files" >&2; exit 1; }
echo "$STAMP_TEXT" >"$PREFIX.new/.pdserve-stamp"
rm -rf "$PREFIX"
mv "$PREFIX.new" "$PREFIX"
echo "build-xgrammar: installed $(du -h "$PREFIX/lib/libxgrammar.a" | cut -f1) libxgrammar.a" >&2
echo "$PREFIX"
