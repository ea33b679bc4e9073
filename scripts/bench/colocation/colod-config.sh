#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# colod-config.sh RUNDIR: prints the colod config for a benchmark/demo run: the daemon talks to
# the peer's NRI socket RUNDIR/nri.sock, keeps its control socket and journal in RUNDIR, serves
# metrics on a private loopback port; the policy section is policy/config/default.yaml as is, or
# the file named by $COLOD_POLICY_FILE (same format) for experiments, with the overrides in
# $COLOD_POLICY_SET ("key=value key=value": a leaf key that occurs once in the file), and daemon
# settings added from $COLOD_DAEMON_SET (same form, e.g. realtime_priority=0).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
run=$1
port=$((19400 + $$ % 500))
cat <<YAML
daemon:
  interval_ms: 100
  nri_socket: $run/nri.sock
  mode: act
  cgroup_driver: cgroupfs
  control_socket: $run/colod.sock
  metrics_listen: "127.0.0.1:$port"
  journal_path: $run/journal.json
  restore_on_stop: true
  log_format: text
  log_level: info
YAML
for kv in ${COLOD_DAEMON_SET:-}; do
  key=${kv%%=*} value=${kv#*=}
  [[ $key =~ ^[a-z0-9_]+$ && $kv == *=* ]] || { echo "colod-config: bad daemon override $kv" >&2; exit 1; }
  echo "  $key: $value"
done
cat <<YAML
policy:
YAML
policy=${COLOD_POLICY_FILE:-$root/policy/config/default.yaml}
[[ -f $policy ]] || { echo "colod-config: no policy file $policy" >&2; exit 1; }
text=$(grep -v -e '^#' -e '^\s*$' "$policy")
for kv in ${COLOD_POLICY_SET:-}; do
  key=${kv%%=*} value=${kv#*=}
  [[ $key =~ ^[a-z0-9_]+$ && $kv == *=* ]] || { echo "colod-config: bad override $kv" >&2; exit 1; }
  n=$(grep -c -E "^\s*$key:" <<<"$text" || true)
  [[ $n == 1 ]] || { echo "colod-config: key $key occurs $n times in $policy" >&2; exit 1; }
  text=$(sed -E "s/^(\s*$key:).*/\1 $value/" <<<"$text")
done
sed 's/^/  /' <<<"$text"
