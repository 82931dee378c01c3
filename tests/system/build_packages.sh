#!/usr/bin/env bash
# Builds the Debian packages once for the tests that install them (ctest fixture
# snowflake_debs): version N into OUT_DIR/n and N+1 (the patch number bumped, for the
# upgrade check) into OUT_DIR/n1, each with scripts/package.
#
#   build_packages.sh SOURCE_DIR OUT_DIR
set -uo pipefail

source_dir=$1
out=$2
version=$(sed -n 's/^project([^)]*VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
next_version=${version%.*}.$(( ${version##*.} + 1 ))
start=$(date +%s)
rm -rf "$out"
mkdir -p "$out"
# No -dbgsym packages (not installed anywhere); N+1 is linted already as N. Both compile
# through one ccache (scripts/test's, which outlives the run, or a fresh one), so N+1
# recompiles only the files the version is in.
export DEB_BUILD_OPTIONS="noautodbgsym ${DEB_BUILD_OPTIONS:-}"
# Line tables only (-g1 after dpkg-buildflags' -g): the packaged binaries are stripped and
# the debug level changes no generated code, so the packages behave as released ones, and
# each compile takes about a third less time.
export DEB_CFLAGS_APPEND="-g1 ${DEB_CFLAGS_APPEND:-}" DEB_CXXFLAGS_APPEND="-g1 ${DEB_CXXFLAGS_APPEND:-}"
export SNOWFLAKE_PACKAGE_CCACHE="${SNOWFLAKE_PACKAGE_CCACHE_DIR:-$out/ccache}"
"$source_dir/scripts/package" "$out/n" > "$out/package-n.log" 2>&1 ||
  { tail -40 "$out/package-n.log"; echo "FAIL: scripts/package (version $version)" >&2; exit 1; }
SNOWFLAKE_PACKAGE_VERSION=$next_version SNOWFLAKE_PACKAGE_LINTIAN=no \
  "$source_dir/scripts/package" "$out/n1" > "$out/package-n1.log" 2>&1 ||
  { tail -40 "$out/package-n1.log"; echo "FAIL: scripts/package (version $next_version)" >&2; exit 1; }
grep -h "^package:" "$out/package-n.log" "$out/package-n1.log"
ls -1 "$out"/n/*.deb "$out"/n1/*.deb
echo "PASS: packages $version and $next_version in $(( $(date +%s) - start )) s"
