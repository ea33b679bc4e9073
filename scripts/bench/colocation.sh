#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The colocation benchmark: LS alone, LS + BE without colod, LS + BE with colod, alternated
# --rounds times in one run on this machine, medians and spread reported. See
# scripts/bench/colocation/README.md for the setup and how each number is measured.
#   sudo scripts/bench/colocation.sh [--rounds 5] [--duration 40] [--out DIR] ...
# Last line:
#   colocation: ls_p99_solo_us=.. ls_p99_nocolod_us=.. ls_p99_colod_us=.. be_ops_nocolod=..
#               be_ops_colod=.. reaction_p50_ms=.. colod_rss_mib=..
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=colocation/lib.sh
source "$here/colocation/lib.sh"
CB_TAG=colocation

rounds=5 duration=40 warmup=5 gap=3 inject_at= backend=auto build=1 rss=1 rss_containers=1000
phases="solo nocolod colod"
out=/tmp/colod-colocation-$(date +%Y%m%d-%H%M%S)
usage() {
  cat <<USAGE
usage: $0 [options]
  --rounds N         phase rounds (solo, nocolod, colod), default $rounds (>= 5 for a result)
  --duration S       seconds per phase, default $duration
  --warmup S         first seconds of every phase not recorded by the LS probe, default $warmup
                     (LS and BE run from the phase start: colod's first reaction happens in the
                     warm-up, the antagonist's inside the recorded window)
  --gap S            idle seconds between phases, default $gap
  --inject-at S      second of a BE phase at which the antagonist starts
                     (default warmup + (duration - warmup)/3)
  --phases LIST      subset/order of "solo nocolod colod", default "$phases"
  --backend B        peer (colod-testpeer, needed for colod) | cgroup (plain cgroups) | auto
  --rss-containers N fake containers the peer reports for colod_rss_mib, default $rss_containers
  --no-rss           skip the colod_rss_mib step
  --policy FILE      policy config for colod (format of policy/config/default.yaml; default that
                     file): for experiments, recorded in meta.txt
  --policy-set K=V   override one policy leaf key (repeatable), e.g. min_samples=3
  --node-shares N    cpu.shares of the simulated node's top cgroup vs other host work,
                     default $CB_NODE_SHARES
  --no-build         use the binaries already in \$COLOD_BUILD_DIR (default build-bench)
  --out DIR          results directory, default /tmp/colod-colocation-<time>
USAGE
}
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --gap) gap=$2; shift 2 ;;
    --inject-at) inject_at=$2; shift 2 ;;
    --phases) phases=$2; shift 2 ;;
    --backend) backend=$2; shift 2 ;;
    --rss-containers) rss_containers=$2; shift 2 ;;
    --no-rss) rss=0; shift ;;
    --policy-set) COLOD_POLICY_SET="${COLOD_POLICY_SET:-} $2"; export COLOD_POLICY_SET; shift 2 ;;
    --policy) COLOD_POLICY_FILE=$(realpath "$2"); export COLOD_POLICY_FILE; shift 2 ;;
    --no-build) build=0; shift ;;
    --node-shares) CB_NODE_SHARES=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 3 ;;
  esac
done
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 50 ]] || { echo "--rounds: 1..50" >&2; exit 3; }
[[ $duration =~ ^[0-9]+$ && $duration -ge 5 && $duration -le 600 ]] || { echo "--duration: 5..600" >&2; exit 3; }
[[ $warmup =~ ^[0-9]+$ && $warmup -le $((duration - 3)) ]] || { echo "--warmup: 0..duration-3" >&2; exit 3; }
[[ -z $inject_at ]] && inject_at=$((warmup + (duration - warmup) / 3))
((inject_at >= 1 && inject_at < duration - 2)) || { echo "--inject-at must be in [1, duration-3]" >&2; exit 3; }

cb_init "$out"
trap cb_cleanup EXIT
for c in stress-ng redis-server redis-benchmark redis-cli python3; do
  command -v "$c" >/dev/null || cb_die "$c missing: run sudo scripts/install-deps.sh"
done

if ((build)); then
  cb_log "building (build dir $CB_BUILD, -j${COLOD_JOBS:-2})"
  cb_build colod-probe || cb_die "colod-probe does not build"
  for t in colod-testpeer colod; do
    if cb_has_target "$t"; then cb_build "$t" || cb_log "warning: $t does not build"; fi
  done
fi
probe=$(cb_bin colod-probe)
[[ -n $probe ]] || cb_die "colod-probe not built"
if [[ $backend == auto ]]; then
  backend=cgroup
  [[ -n $(cb_bin colod-testpeer) ]] && backend=peer
fi
have_colod=0
[[ $backend == peer && -n $(cb_bin colod) ]] && have_colod=1

# One calibration for every phase: identical work per request everywhere.
ipu=$("$probe" --calibrate-only | sed -n 's/^iters_per_us=//p')
cb_log "probe calibration: iters_per_us=$ipu"

# LS weight 512 (probe 400m + redis 100m), BE 4x that (2 x 1000m), like Burstable batch pods that
# request whole CPUs; the antagonist (another 1000m) joins each BE phase at --inject-at.
redis_port=$((16400 + $$ % 1000))
cb_add ls-probe ls-probe ls 400 probe "$probe" --iters-per-us "$ipu" --warmup "$warmup"
cb_add ls-redis ls-redis ls 100 redis "$redis_port"
cb_add be-cpu be-cpu be 1000 stress --cpu 2
cb_add be-cache be-cache be 1000 stress --cache 2
cb_add be-antagonist be-antagonist be 1000 stress --vm 2 --vm-bytes 128M --cpu 1
ls_names=(ls-probe ls-redis)
be_names=(be-cpu be-cache)
cb_start_node "$backend"

colod_config=$CB_RUN/colod.yaml
if ((have_colod)); then
  bash "$here/colocation/colod-config.sh" "$CB_RUN" >"$colod_config"
fi

{
  echo "command: $0 ${COLOD_POLICY_SET:+--policy-set '$COLOD_POLICY_SET' }--rounds $rounds --duration $duration --warmup $warmup --gap $gap --inject-at $inject_at --node-shares $CB_NODE_SHARES"
  echo "backend: $backend; colod: $have_colod; started $(date -u +%FT%TZ); host $(uname -r), $(nproc) CPUs"
  echo "policy: ${COLOD_POLICY_FILE:-policy/config/default.yaml}${COLOD_POLICY_SET:+ with$COLOD_POLICY_SET}"
  echo "load before the run (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$CB_RUN/meta.txt"

run_phase() {  # TAG KIND
  local tag=$1 kind=$2
  if [[ $kind == colod ]]; then
    cb_start_colod "$colod_config" "$CB_RUN/colod.log" || { cb_log "$tag: colod unavailable, phase skipped"; return 0; }
    echo "$tag colod-started $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
    sleep 1  # colod's first intervals: baselines from LS alone
  fi
  cb_log "$tag: ${duration}s"
  local cpu0
  cpu0=$(cb_cpu_sample)
  cb_trigger "$tag" "$duration" "${ls_names[@]}"
  if [[ $kind != solo ]]; then
    cb_trigger "$tag" "$duration" "${be_names[@]}"
    sleep "$inject_at"
    cb_trigger "$tag" $((duration - inject_at)) be-antagonist
    cb_wait_done "$tag" $((duration + 30)) "${ls_names[@]}" "${be_names[@]}" be-antagonist
  else
    cb_wait_done "$tag" $((duration + 30)) "${ls_names[@]}"
  fi
  echo "$tag $(nproc) $cpu0 $(cb_cpu_sample)" >>"$CB_RUN/phase-cpu.txt"
  if [[ $kind == colod ]]; then
    cb_stop_colod
    echo "$tag colod-stopped $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
  fi
  # Phase line, so progress is visible and a killed run still leaves data.
  python3 "$here/colocation/summarize.py" --phase "$tag" "$CB_RUN" || true
}

for r in $(seq 1 "$rounds"); do
  for kind in $phases; do
    if [[ $kind == colod && $have_colod -eq 0 ]]; then
      continue
    fi
    run_phase "r$r-$kind" "$kind"
    sleep "$gap"
  done
done

if ((rss && have_colod)); then
  cb_log "colod_rss_mib: colod against a peer that reports $rss_containers containers"
  bash "$here/colocation/rss.sh" "$CB_RUN" "$rss_containers" >"$CB_RUN/rss.txt" || cb_log "warning: rss step failed"
  # The same with 10 containers: what the 1000 cost on top of colod's fixed footprint.
  (CB_TAG=rss-small; mkdir -p "$CB_RUN/small" && bash "$here/colocation/rss.sh" "$CB_RUN/small" 10 >"$CB_RUN/rss-small.txt") ||
    cb_log "warning: rss step (10 containers) failed"
fi

echo "load after the run (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg)" >>"$CB_RUN/meta.txt"
cb_cleanup
trap - EXIT
python3 "$here/colocation/summarize.py" "$CB_RUN" | tee "$CB_RUN/result.txt"
