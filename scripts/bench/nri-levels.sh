#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Synchronize and CreateContainer per NRI level (issue 18), one line:
#   nri levels: v0.6 sync_ms=<ms> create_p50_us=<us> create_p99_us=<us> | v0.8 ... | v0.11 ... | v0.12 ...
#   scripts/bench/nri-levels.sh [--build DIR] [--pods 100] [--containers 1000] [--creates 1000]
# colod-testpeer at each level (Go, Debian's ttrpc) with --pods/--containers synthetic fake
# containers, and colod-testplugin (our stub, observe role: it answers and adjusts nothing) as an
# external plugin. sync_ms: the runtime's whole Synchronize (all chunks; one message at v0.6) as
# the peer's plugin-synchronized line times it; create: the runtime-side round trip of each
# CreateContainer call (event-relayed "us") for --creates fake containers. Scripts/bench/nri.sh
# prints this line before its last.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${COLOD_BUILD_DIR:-$root/build}
pods=100 ctrs=1000 creates=1000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --pods) pods="$2"; shift 2 ;;
    --containers) ctrs="$2"; shift 2 ;;
    --creates) creates="$2"; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--pods N] [--containers N] [--creates N]" >&2; exit 2 ;;
  esac
done
peer="$build/nri/testpeer/colod-testpeer"
plugin="$build/nri/testplugin/colod-testplugin"
if [[ ! -x "$peer" || ! -x "$plugin" ]]; then
  echo "nri levels: NA (build colod-testpeer and colod-testplugin in $build)"
  exit 0
fi
tmp=$(mktemp -d /tmp/colod-nri-levels-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
python3 - "$creates" >"$tmp/scenario.json" <<'PY'
import json, sys
n = int(sys.argv[1])
tl = [{"at_ms": 0, "op": "wait_plugins", "count": 1, "timeout_ms": 30000},
      {"at_ms": 0, "op": "run_pod", "pod": "bench"}]
tl += [{"at_ms": 0, "op": "create", "container": f"c{i}"} for i in range(n)]
print(json.dumps({"pods": [{"name": "bench", "qos": "burstable"}],
                  "containers": [{"name": f"c{i}", "pod": "bench", "fake": True} for i in range(n)],
                  "timeline": tl}))
PY
line="nri levels:"
for v in v0.6 v0.8 v0.11 v0.12; do
  sock="$tmp/$v/nri.sock" log="$tmp/$v.log"
  "$peer" --socket "$sock" --nri-version "$v" --log "$log" --scenario "$tmp/scenario.json" \
    --synth-pods "$pods" --synth-containers "$ctrs" --exit-after-scenario 2>"$tmp/$v.err" &
  ppid=$!
  for _ in $(seq 200); do [[ -S "$sock" ]] && break; sleep 0.05; done
  "$plugin" --role observe --socket "$sock" --name bench --idx 50 2>"$tmp/$v.plugin.err" &
  qpid=$!
  wait "$ppid" || true
  kill "$qpid" 2>/dev/null || true
  wait "$qpid" 2>/dev/null || true
  line+=" $(python3 - "$log" "$v" <<'PY'
import json, sys
sync, create = None, []
for raw in open(sys.argv[1]):
    e = json.loads(raw)
    if e.get("event") == "plugin-synchronized" and sync is None:
        sync = e["us"] / 1000.0
    elif e.get("event") == "event-relayed" and e.get("rpc") == "CreateContainer":
        create.append(e["us"])
create.sort()
pct = lambda p: create[min(len(create) - 1, int(p * len(create)))] if create else "NA"
s = f"{sync:.1f}" if sync is not None else "NA"
print(f"{sys.argv[2]} sync_ms={s} create_p50_us={pct(0.5)} create_p99_us={pct(0.99)}", end="")
PY
)"
  [[ $v != v0.12 ]] && line+=" |"
done
echo "$line"
