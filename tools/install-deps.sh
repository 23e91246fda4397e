#!/usr/bin/env bash
# Installs what tapegrad needs to build and test, from Debian 12's own packages only.
# Idempotent and quick when everything is present: apt-get runs only for missing packages.
#   bash tools/install-deps.sh            # build + test dependencies
#   bash tools/install-deps.sh --bench    # also libtorch, PyTorch, OpenBLAS and perf for bench/ and tests/fixtures
#   bash tools/install-deps.sh --fuzz     # also clang and its libFuzzer runtime for tests/fuzz
set -euo pipefail

packages=(cmake make g++ libeigen3-dev libblis-serial-dev libtbb-dev libspdlog-dev catch2 nlohmann-json3-dev zlib1g-dev python3)
# ccache: the top-level CMakeLists.txt compiles through it when it is installed (a rebuild, another
# build directory or another clone then replays the compiles it has seen).
packages+=(ccache)
# The API reference (`docs` target) and the test that every public declaration has a Doxygen comment.
packages+=(doxygen)
# The examples and their tests: flags (CLI11), Fashion-MNIST, loss curves (gnuplot), NumPy for the
# test that loads a tapegrad checkpoint in Python, and OpenMPI for tapegrad::distributed.
packages+=(libcli11-dev dataset-fashion-mnist gnuplot-nox python3-numpy libopenmpi-dev openmpi-bin)
# examples/char_gpt trains on the King James Bible as Debian's `bible` program prints it, and
# prints bzip2 -9's bits per character on its validation text for scale.
packages+=(bible-kjv bible-kjv-text bzip2)
case "${1:-}" in
  --bench) packages+=(libtorch-dev python3-torch libopenblas0-openmp linux-perf) ;;
  --fuzz) packages+=(clang libclang-rt-14-dev) ;;
esac

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
