#!/usr/bin/env bash
# Builds oneTBB's libtbb with ThreadSanitizer from Debian's own source package (the version of the
# installed libtbb-dev, Debian's patches applied) and installs it into PREFIX, for the TSan build:
#   bash tools/build-tsan-tbb.sh /opt/tbb-tsan
#   cmake -S . -B build-tsan -DTG_SANITIZE=thread -DTBB_DIR=/opt/tbb-tsan/lib/cmake/TBB ...
# Why: TSan sees only the synchronisation it instrumented. With Debian's uninstrumented libtbb it
# misses the happens-before edges of tbb::parallel_for's fork and join and of oneTBB's task pool,
# and reports them as races. The instrumented libtbb makes those edges visible, so no suppression
# is needed. The test binaries find it through their build RPATH.
# libtbbmalloc is not built: libtbb then allocates with malloc, which TSan intercepts. (libtbb
# loads libtbbmalloc only from its own directory, so Debian's uninstrumented one is never used.)
# Idempotent: returns at once when PREFIX already holds a build of this version. Needs root or
# sudo the first time (a deb-src entry for deb.debian.org, dpkg-dev); under a minute on 2 cores.
set -euo pipefail

prefix="${1:?usage: build-tsan-tbb.sh PREFIX}"
[[ "$prefix" = /* ]] || prefix="$PWD/$prefix"

sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
version="$(dpkg-query -W -f='${Version}' libtbb-dev)"  # install-deps.sh installs libtbb-dev
stamp="$prefix/share/tapegrad-tsan-tbb.stamp"  # what was built, written last
if [[ -f "$stamp" && "$(cat "$stamp")" == "onetbb $version -fsanitize=thread" ]]; then
  echo "build-tsan-tbb: $prefix already holds onetbb $version built with -fsanitize=thread"
  exit 0
fi

# apt-get source needs a deb-src entry. Debian 12 ships only binary ones (debian.sources,
# Types: deb); the source entry mirrors them: same archive, suites, components and key.
if ! apt-cache showsrc onetbb 2>/dev/null | grep -x "Version: $version" >/dev/null; then
  if [[ -z "$(apt-cache showsrc onetbb 2>/dev/null)" ]]; then
    if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
      sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
        $sudo tee /etc/apt/sources.list.d/debian-src.sources >/dev/null
    else
      sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $sudo tee /etc/apt/sources.list.d/debian-src.list >/dev/null
    fi
  fi
  $sudo apt-get update -qq
fi
# dpkg-source unpacks the package and applies Debian's patches.
dpkg-query -W -f='${Status}' dpkg-dev 2>/dev/null | grep -q "install ok installed" ||
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends dpkg-dev

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "build-tsan-tbb: building onetbb $version with -fsanitize=thread into $prefix"
# -q -q: no progress lines. apt warns that it downloads as root when _apt cannot write $work.
(cd "$work" && apt-get source -q -q onetbb="$version")
source_dir="$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'onetbb-*')"

# TBB_SANITIZE is oneTBB's own switch: it adds -fsanitize=thread to compiling and linking, and
# turns off IPO, with which GCC leaves code uninstrumented. -Wno-tsan: GCC warns at each
# atomic_thread_fence that TSan does not model fences. A fence TSan ignores can only add reports
# (an edge it misses), never hide a race. TBB_STRICT=OFF: no -Werror on oneTBB's own warnings.
# No hwloc: the tbbbind plugin only pins threads to cores.
cmake -S "$source_dir" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS=-Wno-tsan \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib -DTBB_SANITIZE=thread \
  -DTBB_TEST=OFF -DTBB_EXAMPLES=OFF -DTBB_STRICT=OFF -DTBBMALLOC_BUILD=OFF -DTBB4PY_BUILD=OFF \
  -DTBB_DISABLE_HWLOC_AUTOMATIC_SEARCH=ON >/dev/null
cmake --build "$work/build" -j"$(nproc)" >/dev/null  # errors and warnings still reach stderr
owner=""  # who may write to $prefix
mkdir -p "$prefix" 2>/dev/null && [[ -w "$prefix" ]] || owner="$sudo"
$owner cmake --install "$work/build" >/dev/null
echo "onetbb $version -fsanitize=thread" | $owner tee "$stamp" >/dev/null
echo "build-tsan-tbb: installed $prefix/lib/libtbb.so"
