#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the NRI libFuzzer target with clang (ASan+UBSan) in its own build dir and runs it for a
# bounded time over the checked-in corpus. Exits non-zero on a crash, leak or sanitizer report.
#   scripts/fuzz.sh --seconds 60
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=60
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    *) echo "usage: $0 [--seconds N]" >&2; exit 2 ;;
  esac
done
build=${COLOD_FUZZ_BUILD_DIR:-$root/build-fuzz}
cc=$(command -v clang || command -v clang-14)
cxx=$(command -v clang++ || command -v clang++-14)
# Only the fuzz target is built: no gRPC, no BPF, no tests.
CC=$cc CXX=$cxx cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCOLOD_BUILD_FUZZERS=ON -DCOLOD_BUILD_TESTS=OFF -DCOLOD_BUILD_BENCHMARKS=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
  >/dev/null
cmake --build "$build" --target nri_fuzz -j "${COLOD_JOBS:-2}"
corpus="$root/nri/fuzz/corpus"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# New inputs go to a scratch dir so the checked-in corpus only changes on purpose.
"$build/nri/nri_fuzz" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 -artifact_prefix="$work/" "$work" "$corpus"
echo "nri fuzz: ${seconds}s without a crash"
