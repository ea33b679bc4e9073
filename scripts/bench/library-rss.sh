#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What colod's shared libraries leave resident before colod does anything (issue 17: the RSS
# goal): loads the libraries colod needs (its DT_NEEDED entries, in order; each pulls its own),
# one at a time, in a bare process (library-rss.c), and prints that process's resident memory
# after each, in all and the part mapped from libcrypto and libssl.
#   scripts/bench/library-rss.sh [COLOD_BINARY]     (default build/userspace/daemon/colod)
# Last line: library-rss: libraries=<n> rss_kb= anon_kb= libcrypto_kb= libssl_kb=
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
colod=${1:-$root/build/userspace/daemon/colod}
[[ -x $colod ]] || { echo "library-rss: $colod is not an executable colod (build it first)" >&2; exit 3; }
work=$(mktemp -d /tmp/library-rss-XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -Wall -Wextra -o "$work/library-rss" "$here/library-rss.c" -ldl
mapfile -t libs < <(readelf -d "$colod" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[[ ${#libs[@]} -gt 0 ]] || { echo "library-rss: $colod names no shared libraries" >&2; exit 1; }
"$work/library-rss" "${libs[@]}" | tee "$work/out"
last=$(tail -n 1 "$work/out")
echo "library-rss: libraries=${#libs[@]} ${last#*step=* }"
