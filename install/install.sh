#!/usr/bin/env bash
# Install libcausal_conv1d: the shared library (SONAME libcausal_conv1d.so.MAJOR), the static
# archive, the C header, a pkg-config file and a relocatable CMake package.
#
# Usage: install/install.sh [--prefix DIR] [--libdir NAME] [--no-build | --from DIR]
#   --prefix DIR   install under DIR (default /usr/local)
#   --libdir NAME  library directory relative to the prefix (default lib; e.g. lib64,
#                  lib/x86_64-linux-gnu)
#   --no-build     install what target/release already holds instead of running
#                  `cargo build --release --lib` first
#   --from DIR     install the libcausal_conv1d.so/.a found in DIR (implies --no-build), e.g.
#                  .carry/gpu or target/release/deps
#   DESTDIR=/stage install/install.sh ...   stages the files under /stage$PREFIX; the files keep
#                  naming $PREFIX (what packagers want)
# The build honours CAUSAL_CONV1D_BACKEND etc. (README.md, Building) and CARGO_TARGET_DIR.
#
# Installed ($PREFIX/$LIBDIR written as lib):
#   lib/libcausal_conv1d.so.X.Y.Z, lib/libcausal_conv1d.so.MAJOR -> .so.X.Y.Z, lib/libcausal_conv1d.so -> .so.MAJOR
#   lib/libcausal_conv1d.a
#   include/causal_conv1d.h
#   lib/pkgconfig/causal_conv1d.pc
#   lib/cmake/causal_conv1d/causal_conv1dConfig.cmake, causal_conv1dConfigVersion.cmake
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=/usr/local
libdir=lib
build=1
from=

usage() { sed -n '2,22s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
die() { echo "install.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    --libdir) [ $# -ge 2 ] || die "--libdir needs a name"; libdir=$2; shift 2 ;;
    --libdir=*) libdir=${1#--libdir=}; shift ;;
    --no-build) build=0; shift ;;
    --from) [ $# -ge 2 ] || die "--from needs a directory"; from=$2; build=0; shift 2 ;;
    --from=*) from=${1#--from=}; build=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

[ -n "$prefix" ] || die "--prefix is empty"
case $prefix in /*) ;; *) prefix=$PWD/$prefix ;; esac
prefix=${prefix%/}
[ -n "$prefix" ] || prefix=/  # --prefix / is legal
case $libdir in
  "" | /* | *..*) die "--libdir must be a relative path inside the prefix without '..' (got '$libdir')" ;;
esac
libdir=${libdir%/}

# The [package] version of Cargo.toml (the same string ccv1d_version() returns).
version=$(awk '/^\[/{in_pkg = ($0 == "[package]")} in_pkg && /^version *=/{gsub(/.*= *"|".*/, ""); print; exit}' "$root/Cargo.toml")
[[ $version =~ ^([0-9]+)\.[0-9]+\.[0-9]+ ]] || die "cannot read a version from $root/Cargo.toml (got '$version')"
soversion=${BASH_REMATCH[1]}  # build.rs sets SONAME libcausal_conv1d.so.<major>

target_dir=${CARGO_TARGET_DIR:-$root/target}
case $target_dir in /*) ;; *) target_dir=$root/$target_dir ;; esac
release=${from:-$target_dir/release}
if [ $build = 1 ]; then
  (cd "$root" && cargo build --release --lib)
fi
for f in "$release/libcausal_conv1d.so" "$release/libcausal_conv1d.a" "$root/include/causal_conv1d.h"; do
  [ -f "$f" ] || die "$f is missing (run without --no-build, or cargo build --release first)"
done

# System libraries the static archive needs: what `cargo rustc --release --lib --crate-type
# staticlib -- --print native-static-libs` lists, less -lc (the compiler driver adds it). On glibc
# >= 2.34 util/rt/pthread/dl are empty stubs; older ones need them.
static_libs=(gcc_s util rt pthread m dl)

dest=${DESTDIR:-}
lib_dest=$dest$prefix/$libdir
[ "$prefix" = / ] && lib_dest=$dest/$libdir
inc_dest=${lib_dest%"/$libdir"}/include
pc_dest=$lib_dest/pkgconfig
cmake_dest=$lib_dest/cmake/causal_conv1d

# From lib/cmake/causal_conv1d back up to the prefix: one ".." per path component.
up=..
IFS=/ read -ra parts <<<"$libdir/cmake"
for _ in "${parts[@]}"; do up=$up/..; done

# Template substitution in pure bash (quoted replacements: no sed escaping of paths).
fill() {  # fill TEMPLATE OUTPUT
  local text
  text=$(<"$1")
  text=${text//@PREFIX@/"$prefix"}
  text=${text//@LIBDIR@/"$libdir"}
  text=${text//@VERSION@/"$version"}
  text=${text//@SOVERSION@/"$soversion"}
  text=${text//@PREFIX_FROM_CONFIG@/"$up"}
  text=${text//@STATIC_LIBS@/"$(printf -- '-l%s ' "${static_libs[@]}" | sed 's/ $//')"}
  text=${text//@CMAKE_STATIC_LIBS@/"$(IFS=';'; echo "${static_libs[*]}")"}
  printf '%s\n' "$text" >"$2"
  chmod 644 "$2"
}

install -d "$lib_dest" "$inc_dest" "$pc_dest" "$cmake_dest"
real=libcausal_conv1d.so.$version
install -m 755 "$release/libcausal_conv1d.so" "$lib_dest/$real"
ln -sfn "$real" "$lib_dest/libcausal_conv1d.so.$soversion"
ln -sfn "libcausal_conv1d.so.$soversion" "$lib_dest/libcausal_conv1d.so"
install -m 644 "$release/libcausal_conv1d.a" "$lib_dest/libcausal_conv1d.a"
install -m 644 "$root/include/causal_conv1d.h" "$inc_dest/causal_conv1d.h"
fill "$root/install/causal_conv1d.pc.in" "$pc_dest/causal_conv1d.pc"
fill "$root/install/causal_conv1dConfig.cmake.in" "$cmake_dest/causal_conv1dConfig.cmake"

# Version file: compatible when the major (the SONAME number) matches and the installed version is
# at least the requested one; a 32-bit consumer is refused (the library is 64-bit only).
cat >"$cmake_dest/causal_conv1dConfigVersion.cmake" <<EOF
# Version check of the causal_conv1d CMake package (written by install/install.sh).
set(PACKAGE_VERSION "$version")
if(NOT PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION OR NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL "$soversion")
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
if(CMAKE_SIZEOF_VOID_P AND NOT CMAKE_SIZEOF_VOID_P STREQUAL "8")
  set(PACKAGE_VERSION "\${PACKAGE_VERSION} (64-bit)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
EOF
chmod 644 "$cmake_dest/causal_conv1dConfigVersion.cmake"

echo "installed causal_conv1d $version (SONAME libcausal_conv1d.so.$soversion) into $dest$prefix:"
for f in "$lib_dest/$real" "$lib_dest/libcausal_conv1d.so.$soversion" "$lib_dest/libcausal_conv1d.so" \
  "$lib_dest/libcausal_conv1d.a" "$inc_dest/causal_conv1d.h" "$pc_dest/causal_conv1d.pc" \
  "$cmake_dest/causal_conv1dConfig.cmake" "$cmake_dest/causal_conv1dConfigVersion.cmake"; do
  echo "  $f"
done
