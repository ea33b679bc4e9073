#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The colocation benchmark (issue 15 item 4): in every round, in an order that rotates from round
# to round, the phases
#   solo             LS alone
#   floor            LS alone on the CPUs colod's cpuset split leaves it (floors.be_min_cpus
#                    taken away), no BE: the best any cpuset/quota controller can give here
#   split            LS on those CPUs, every BE pod placed on the others by the harness as it
#                    starts, no colod: the best a cpuset split gives while BE keeps running
#                    (what BE on the other CPUs still costs the LS: shared core, cache, memory)
#   nocolod          LS + BE arriving as new pods (the antagonist pod joins mid-phase)
#   colod            the same with colod
#   suppress         the same with Koordinator's CPU Suppress rule (scripts/bench/suppress)
#   busy             colod; an existing, idle BE container turns busy mid-phase
#   foreign-nocolod  LS + BE pods + a hog outside any pod at default weight, without colod
#   foreign-colod    the same with colod
#   dynamic          colod; BE pods; the LS load steps 10 % -> 60 % -> 10 % of the node
#   dynamic-nocolod  the same without colod: the ceiling of be_harvest in the same rounds
# and reports medians over rounds. Every request is recorded (--warmup 0 by default): the BE
# arrival is in the LS p99. See scripts/bench/colocation/README.md for how each number is taken.
#   sudo scripts/bench/colocation.sh [--rounds 5] [--duration 30] [--out DIR] ...
# Last two lines:
#   colocation: ls_p99_solo_us=.. ls_p99_nocolod_us=.. ls_p99_colod_us=.. be_ops_nocolod=..
#               be_ops_colod=.. reaction_p50_ms=.. colod_rss_mib=..
#   protection: ls_p99_solo_us=.. ls_p99_floor_us=.. ls_p99_colod_us=.. ls_p99_suppress_us=..
#               ls_p99_nocolod_us=.. be_ops_nocolod=.. be_ops_colod=.. be_ops_suppress=..
#               reaction_busy_p50_ms=.. foreign_ls_ratio=.. foreign_be_ratio=.. be_harvest=..
#               colod_rss_mib=..
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=colocation/lib.sh
source "$here/colocation/lib.sh"
CB_TAG=colocation

all_phases="solo floor split nocolod colod suppress busy foreign-nocolod foreign-colod dynamic dynamic-nocolod"
rounds=5 duration=30 warmup=0 gap=3 inject_at= build=1 rss=1 rss_containers=1000
phases=$all_phases
out=/tmp/colod-colocation-$(date +%Y%m%d-%H%M%S)
usage() {
  cat <<USAGE
usage: $0 [options]
  --rounds N         rounds of every phase, default $rounds (>= 5 for a result); the phase
                     order rotates by one each round
  --duration S       seconds per phase, default $duration (dynamic: three steps of S/3)
  --warmup S         first seconds of every phase not recorded by the LS probe, default $warmup
                     (everything recorded: the BE arrival is in the LS p99)
  --gap S            idle seconds between phases, default $gap
  --inject-at S      second of a phase at which the antagonist pod arrives (nocolod, colod,
                     suppress) or the idle BE container turns busy (busy); default S/3
  --phases LIST      subset/order of "$all_phases"
  --rss-containers N fake containers the peer reports for colod_rss_mib, default $rss_containers
  --no-rss           skip the colod_rss_mib step
  --policy FILE      policy config for colod (format of policy/config/default.yaml; default that
                     file): for experiments, recorded in meta.txt
  --policy-set K=V   override one policy leaf key (repeatable), e.g. min_samples=3
  --daemon-set K=V   add one daemon setting (repeatable), e.g. realtime_priority=1
  --record-traces    record a policy trace of every colod run (TAG.trace) and print how
                     regularly colod ran its rounds after the busy BE started
                     (colocation/round_gaps.py)
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
    --rss-containers) rss_containers=$2; shift 2 ;;
    --no-rss) rss=0; shift ;;
    --policy-set) COLOD_POLICY_SET="${COLOD_POLICY_SET:-} $2"; export COLOD_POLICY_SET; shift 2 ;;
    --daemon-set) COLOD_DAEMON_SET="${COLOD_DAEMON_SET:+$COLOD_DAEMON_SET }$2"; export COLOD_DAEMON_SET; shift 2 ;;
    --record-traces) CB_RECORD_TRACES=1; shift ;;
    --policy) COLOD_POLICY_FILE=$(realpath "$2"); export COLOD_POLICY_FILE; shift 2 ;;
    --no-build) build=0; shift ;;
    --node-shares) CB_NODE_SHARES=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 3 ;;
  esac
done
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 50 ]] || { echo "--rounds: 1..50" >&2; exit 3; }
[[ $duration =~ ^[0-9]+$ && $duration -ge 9 && $duration -le 600 ]] || { echo "--duration: 9..600" >&2; exit 3; }
[[ $warmup =~ ^[0-9]+$ && $warmup -le $((duration / 3 - 1)) ]] || { echo "--warmup: 0..duration/3-1" >&2; exit 3; }
[[ -z $inject_at ]] && inject_at=$((duration / 3))
((inject_at >= 1 && inject_at < duration - 2)) || { echo "--inject-at must be in [1, duration-3]" >&2; exit 3; }
for k in $phases; do
  [[ " $all_phases " == *" $k "* ]] || { echo "--phases: unknown phase $k" >&2; exit 3; }
done

cb_init "$out"
trap cb_cleanup EXIT
for c in stress-ng redis-server redis-benchmark redis-cli python3; do
  command -v "$c" >/dev/null || cb_die "$c missing: run sudo scripts/install-deps.sh"
done

# Only what the chosen phases need (the peer always: BE arrives as pods through NRI).
targets=(colod-probe colod-testpeer)
[[ " $phases " =~ \ (colod|busy|foreign-colod|dynamic)\  ]] || ((rss)) && targets+=(colod)
[[ " $phases " == *" suppress "* ]] && targets+=(colod-suppress)
if ((build)); then
  cb_log "building ${targets[*]} (build dir $CB_BUILD, -j${COLOD_JOBS:-2})"
  cb_build "${targets[@]}" || cb_die "the benchmark's targets do not build"
fi
probe=$(cb_bin colod-probe)
for b in "${targets[@]}"; do
  [[ -n $(cb_bin "$b") ]] || cb_die "$b is not built in $CB_BUILD"
done

# One calibration for every phase: identical work per request everywhere.
ipu=$("$probe" --calibrate-only | sed -n 's/^iters_per_us=//p')
cb_log "probe calibration: iters_per_us=$ipu"

# LS weight 512 (probe 400m + redis 100m), BE 4x that (2 x 1000m), like Burstable batch pods that
# request whole CPUs; the antagonist (another 1000m) arrives at --inject-at. be-busy lives for the
# whole run, idle until the busy phase.
redis_port=$((16400 + $$ % 1000))
cb_add ls-probe ls-probe ls 400 probe "$probe" --iters-per-us "$ipu" --warmup "$warmup"
cb_add ls-redis ls-redis ls 100 redis "$redis_port"
cb_add be-cpu be-cpu be 1000 job --cpu 2
cb_add be-cache be-cache be 1000 job --cache 2
cb_add be-antagonist be-antagonist be 1000 job --vm 2 --vm-bytes 128M --cpu 1
cb_add be-busy be-busy be 1000 stress --cpu 2
ls_names=(ls-probe ls-redis)
be_pods=(be-cpu be-cache)
cb_start_node peer

colod_config=$CB_RUN/colod.yaml
bash "$here/colocation/colod-config.sh" "$CB_RUN" >"$colod_config"
ncpu=$(nproc)
be_min_cpus=$(awk '/^ *be_min_cpus:/ {print $2; exit}' "$colod_config")
be_min_cpus=${be_min_cpus:-1}
((ncpu > be_min_cpus)) || cb_die "the floor phase needs more than $be_min_cpus CPUs"
all_cpus=0-$((ncpu - 1))
# colod's cpuset rung gives BE the highest-numbered CPUs: LS keeps the others.
floor_cpus=0
((ncpu - be_min_cpus > 1)) && floor_cpus=0-$((ncpu - be_min_cpus - 1))
split_be_cpus=$((ncpu - be_min_cpus))
((be_min_cpus > 1)) && split_be_cpus=$((ncpu - be_min_cpus))-$((ncpu - 1))
step_secs=$((duration / 3))

{
  echo "command: $0 ${COLOD_POLICY_SET:+--policy-set '$COLOD_POLICY_SET' }${COLOD_DAEMON_SET:+--daemon-set '$COLOD_DAEMON_SET' }$( ((CB_RECORD_TRACES)) && echo '--record-traces ')--rounds $rounds --duration $duration --warmup $warmup --gap $gap --inject-at $inject_at --node-shares $CB_NODE_SHARES --phases '$phases'"
  echo "backend: peer; started $(date -u +%FT%TZ); host $(uname -r), $ncpu CPUs; floor LS CPUs $floor_cpus"
  echo "policy: ${COLOD_POLICY_FILE:-policy/config/default.yaml}${COLOD_POLICY_SET:+ with$COLOD_POLICY_SET}"
  echo "load before the run (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$CB_RUN/meta.txt"

be_phase() {  # TAG: LS + BE pods from the start, the antagonist pod at --inject-at
  local tag=$1
  cb_trigger "$tag" "$duration" "${ls_names[@]}"
  cb_pods_start "$tag" "$duration" "${be_pods[@]}"
  sleep "$inject_at"
  cb_pods_start "$tag" $((duration - inject_at)) be-antagonist
  cb_wait_done "$tag" $((duration + 30)) "${ls_names[@]}" "${be_pods[@]}" be-antagonist
  cb_pods_stop "${be_pods[@]}" be-antagonist
}

dynamic_phase() {  # TAG: BE pods; the probe alone as LS, 10 % -> 60 % -> 10 % of the node
  local tag=$1 i pct
  # The BE pods outlive the three steps: each step starts when the probe's worker takes its
  # trigger, which a starved worker takes late, and a BE gone before the last step ends reads
  # as CPU left unharvested (session 19: be_harvest 0.12 in the last step).
  cb_pods_start "$tag" $((duration + 15)) "${be_pods[@]}"
  i=0
  cb_usage_sample "$tag@0"
  for pct in 10 60 10; do
    i=$((i + 1))
    # colod-probe: a thread per CPU, one request due every 1000 us on each, pct x 10 us of work
    # -> pct % of the node. The period must be given: without -p the probe sizes it from its
    # --load (0.3) whatever the work, and every step ran at ~30 % of the node (sessions 9-23).
    CB_TRIGGER_EXTRA="-t $ncpu -w $((pct * 10)) -p 1000" cb_trigger "$tag@$i" "$step_secs" ls-probe
    cb_wait_done "$tag@$i" $((step_secs + 30)) ls-probe
    cb_usage_sample "$tag@$i"
  done
  cb_wait_done "$tag" 60 "${be_pods[@]}"
  cb_pods_stop "${be_pods[@]}"
}

run_phase() {  # TAG KIND
  local tag=$1 kind=$2
  case $kind in
    colod|busy|foreign-colod|dynamic)
      CB_TRACE_NAME=$tag
      cb_start_colod "$colod_config" "$CB_RUN/colod.log" || { cb_log "$tag: colod unavailable, phase skipped"; return 0; }
      echo "$tag colod-started $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
      sleep 1 ;;  # colod's first intervals: baselines from LS alone
    suppress)
      cb_start_suppress "$CB_RUN/suppress.log" --be-min-cpus "$be_min_cpus" ||
        { cb_log "$tag: colod-suppress unavailable, phase skipped"; return 0; }
      echo "$tag suppress-started $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
      sleep 1 ;;
    floor|split) cb_peer_cpus "$floor_cpus" "${ls_names[@]}" ;;
  esac
  cb_log "$tag: ${duration}s"
  local cpu0
  cpu0=$(cb_cpu_sample)
  case $kind in
    solo|floor)
      cb_trigger "$tag" "$duration" "${ls_names[@]}"
      cb_wait_done "$tag" $((duration + 30)) "${ls_names[@]}" ;;
    nocolod|colod|suppress) be_phase "$tag" ;;
    split)
      export CB_BE_CPUS=$split_be_cpus
      be_phase "$tag"
      unset CB_BE_CPUS ;;
    busy)
      cb_trigger "$tag" "$duration" "${ls_names[@]}"
      sleep "$inject_at"
      cb_trigger "$tag" $((duration - inject_at)) be-busy
      cb_wait_done "$tag" $((duration + 30)) "${ls_names[@]}" be-busy ;;
    foreign-*)
      cb_hog_start "$tag" "$duration"
      cb_trigger "$tag" "$duration" "${ls_names[@]}"
      cb_pods_start "$tag" "$duration" "${be_pods[@]}"
      cb_wait_done "$tag" $((duration + 30)) "${ls_names[@]}" "${be_pods[@]}"
      cb_pods_stop "${be_pods[@]}"
      cb_hog_stop ;;
    dynamic|dynamic-nocolod) dynamic_phase "$tag" ;;
  esac
  echo "$tag $ncpu $cpu0 $(cb_cpu_sample)" >>"$CB_RUN/phase-cpu.txt"
  case $kind in
    colod|busy|foreign-colod|dynamic)
      cb_stop_colod
      echo "$tag colod-stopped $(cb_now_ns)" >>"$CB_RUN/triggers.txt" ;;
    suppress)
      cb_stop_suppress
      echo "$tag suppress-stopped $(cb_now_ns)" >>"$CB_RUN/triggers.txt" ;;
    floor|split) cb_peer_cpus "$all_cpus" "${ls_names[@]}" ;;
  esac
  # Phase line, so progress is visible and a killed run still leaves data.
  python3 "$here/colocation/summarize.py" --phase "$tag" "$CB_RUN" || true
}

read -r -a order <<<"$phases"
n=${#order[@]}
for r in $(seq 1 "$rounds"); do
  # Rotate: each phase runs at a different position (early/late in a round) across rounds.
  for ((i = 0; i < n; i++)); do
    kind=${order[$(((i + r - 1) % n))]}
    run_phase "r$r-$kind" "$kind"
    sleep "$gap"
  done
done

if ((rss)); then
  cb_log "colod_rss_mib: colod against a peer that reports $rss_containers containers"
  bash "$here/colocation/rss.sh" "$CB_RUN" "$rss_containers" >"$CB_RUN/rss.txt" || cb_log "warning: rss step failed"
  # The same with 10 containers: what the 1000 cost on top of colod's fixed footprint.
  (CB_TAG=rss-small; mkdir -p "$CB_RUN/small" && bash "$here/colocation/rss.sh" "$CB_RUN/small" 10 >"$CB_RUN/rss-small.txt") ||
    cb_log "warning: rss step (10 containers) failed"
  # The same containers with a 192-CPU node's tables (colod told of 192 online CPUs): a
  # container without a cpuset of its own runs on all of them (rss.sh).
  (CB_TAG=rss-big; mkdir -p "$CB_RUN/big" &&
    bash "$here/colocation/rss.sh" "$CB_RUN/big" "$rss_containers" 192 >"$CB_RUN/rss-big.txt") ||
    cb_log "warning: rss step (192 CPUs) failed"
fi

echo "load after the run (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg)" >>"$CB_RUN/meta.txt"
cb_cleanup
trap - EXIT
# Before the summary: its last line is the protection line.
if ((CB_RECORD_TRACES)) && [[ " $phases " == *" busy "* ]]; then
  python3 "$here/colocation/round_gaps.py" "$CB_RUN" | tee "$CB_RUN/rounds.txt" || true
fi
python3 "$here/colocation/summarize.py" "$CB_RUN" | tee "$CB_RUN/result.txt"
