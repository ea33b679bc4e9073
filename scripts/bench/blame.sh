#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The blame benchmark (issue 19, "How it is shown"): does colod restrict the BE container that
# hurts the LS and spare the ones that do not? Each scenario (scripts/bench/blame/README.md) is
# one antagonist and one or two innocents beside the LS probe on the simulated node
# (colod-testpeer, real cgroups, the colocation benchmark's lib.sh). Every trial runs the same
# phase twice, without and with colod (the order alternates between trials): the LS starts, the
# innocents arrive 1 s later, the antagonist a third in, each BE as a new pod.
#   sudo scripts/bench/blame.sh [--trials 3] [--duration 30] [--scenarios a,b] [--out DIR]
# Per trial and per scenario lines, the targets, and last:
#   blame: scenarios=<n> trials=<n> antagonist_hit=<share> innocent_spared=<share>
#          innocent_work_ratio=<median> ls_p99_ratio=<median>
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bdir=$here/blame
# shellcheck source=colocation/lib.sh
source "$here/colocation/lib.sh"
CB_TAG=blame
export PYTHONDONTWRITEBYTECODE=1  # the helpers import each other: no __pycache__ in the tree

all=$(python3 "$bdir/scenarios.py" list | paste -sd, -)
trials=3 duration=30 gap=2 build=1 scenarios=$all
out=/tmp/colod-blame-$(date +%Y%m%d-%H%M%S)
usage() {
  cat <<USAGE
usage: $0 [options]
  --trials N         trials per scenario, default $trials (>= 3 for a result); each trial is a
                     phase without colod and one with it, in alternating order
  --duration S       seconds per phase, default $duration; the antagonist arrives at S/3
  --scenarios LIST   comma-separated subset/order of $all
  --gap S            idle seconds between phases, default $gap
  --policy FILE      policy config for colod (default policy/config/default.yaml)
  --policy-set K=V   override one policy leaf key (repeatable)
  --no-build         use the binaries already in \$COLOD_BUILD_DIR (default build-bench)
  --out DIR          results directory, default /tmp/colod-blame-<time>
USAGE
}
while (($#)); do
  case $1 in
    --trials) trials=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --scenarios) scenarios=$2; shift 2 ;;
    --gap) gap=$2; shift 2 ;;
    --policy-set) COLOD_POLICY_SET="${COLOD_POLICY_SET:-} $2"; export COLOD_POLICY_SET; shift 2 ;;
    --policy) COLOD_POLICY_FILE=$(realpath "$2"); export COLOD_POLICY_FILE; shift 2 ;;
    --no-build) build=0; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 3 ;;
  esac
done
[[ $trials =~ ^[0-9]+$ && $trials -ge 1 && $trials -le 50 ]] || { echo "--trials: 1..50" >&2; exit 3; }
[[ $duration =~ ^[0-9]+$ && $duration -ge 6 && $duration -le 600 ]] || { echo "--duration: 6..600" >&2; exit 3; }
[[ $gap =~ ^[0-9]+$ && $gap -le 60 ]] || { echo "--gap: 0..60" >&2; exit 3; }
IFS=, read -r -a chosen <<<"$scenarios"
((${#chosen[@]})) || { echo "--scenarios: empty" >&2; exit 3; }
for s in "${chosen[@]}"; do
  [[ ",$all," == *",$s,"* ]] || { echo "--scenarios: unknown scenario $s (known: $all)" >&2; exit 3; }
done
inject_at=$((duration / 3))
ncpu=$(nproc)
((ncpu >= 2)) || { echo "blame: the scenarios need at least 2 CPUs" >&2; exit 3; }

cb_init "$out"
for c in stress-ng python3; do
  command -v "$c" >/dev/null || cb_die "$c missing: run sudo scripts/install-deps.sh"
done
targets=(colod-probe colod-testpeer colod coloctl)
if ((build)); then
  cb_log "building ${targets[*]} (build dir $CB_BUILD, -j${COLOD_JOBS:-2})"
  cb_build "${targets[@]}" || cb_die "the benchmark's targets do not build"
fi
for b in colod-probe colod-testpeer colod; do
  [[ -n $(cb_bin "$b") ]] || cb_die "$b is not built in $CB_BUILD"
done
probe=$(cb_bin colod-probe)
coloctl=$(cb_bin coloctl)
# One calibration for every phase: identical work per request everywhere.
ipu=$("$probe" --calibrate-only | sed -n 's/^iters_per_us=//p')
cb_log "probe calibration: iters_per_us=$ipu"

printf '%s\n' "${chosen[@]}" >"$out/scenarios.txt"
{
  echo "command: $0 ${COLOD_POLICY_SET:+--policy-set '$COLOD_POLICY_SET' }--trials $trials --duration $duration --gap $gap --scenarios $scenarios"
  echo "started $(date -u +%FT%TZ); host $(uname -r), $ncpu CPUs; antagonist at ${inject_at}s; policy ${COLOD_POLICY_FILE:-policy/config/default.yaml}${COLOD_POLICY_SET:+ with$COLOD_POLICY_SET}"
  echo "load before the run (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/meta.txt"

# lib.sh's peer scenario, with each container's cpuset pinning (kubelet's static CPU manager)
# from scenarios.py: lib.sh stays as the colocation benchmark uses it.
eval "$(declare -f cb_scenario_json | sed '1s/^cb_scenario_json/bl_scenario_json_base/')"
cb_scenario_json() { bl_scenario_json_base | python3 "$bdir/scenarios.py" pin "$BL_SCENARIO" "$ncpu"; }

bl_sleep() { sleep "$1" & wait $!; }  # a pending TERM is handled at once, not after the sleep

bl_explain() {  # TAG NAMES...: coloctl's view of each BE at the end of a colod phase (evidence)
  local tag=$1 n
  shift
  [[ -n $coloctl ]] || return 0
  for n in "$@"; do
    timeout 5 "$coloctl" -s "$CB_RUN/colod.sock" explain "$n" >"$CB_RUN/$tag.explain.$n.txt" 2>&1 || true
  done
  timeout 5 "$coloctl" -s "$CB_RUN/colod.sock" decisions -n 0 >"$CB_RUN/$tag.decisions.txt" 2>&1 || true
}

bl_phase() {  # TAG MODE(nocolod|colod)
  local tag=$1 mode=$2 cpu0
  echo "$tag phase-start $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
  if [[ $mode == colod ]]; then
    cb_start_colod "$CB_RUN/colod.yaml" "$CB_RUN/$tag.colod.log" ||
      { cb_log "$tag: colod unavailable, trial incomplete"; return 0; }
    echo "$tag colod-started $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
    bl_sleep 1  # colod's first intervals: baselines from the LS alone
  fi
  cb_log "$tag: ${duration}s, antagonist at ${inject_at}s"
  cpu0=$(cb_cpu_sample)
  cb_trigger "$tag" "$duration" ls-probe
  # The innocents arrive once the LS is running, always in that order: whether a new BE finds the
  # LS running decides what an admission rule does with it, so a race would make trials differ.
  bl_sleep 1
  cb_pods_start "$tag" $((duration - 1)) "${innocents[@]}"
  bl_sleep $((inject_at - 1))
  cb_pods_start "$tag" $((duration - inject_at)) "${antagonists[@]}"
  cb_wait_done "$tag" $((duration + 30)) ls-probe "${innocents[@]}" "${antagonists[@]}"
  echo "$tag window-end $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
  echo "$tag $ncpu $cpu0 $(cb_cpu_sample)" >>"$CB_RUN/phase-cpu.txt"
  [[ $mode == colod ]] && bl_explain "$tag" "${innocents[@]}" "${antagonists[@]}"
  cb_pods_stop "${innocents[@]}" "${antagonists[@]}"
  if [[ $mode == colod ]]; then
    cb_stop_colod
    echo "$tag colod-stopped $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
  fi
}

# One scenario in its own subshell and run directory: its own node (peer, cgroups) and colod,
# torn down by lib.sh's cb_cleanup on any exit.
bl_scenario() {  # NAME
  BL_SCENARIO=$1
  # shellcheck disable=SC2034  # read by lib.sh's cb_log
  CB_TAG=blame-$1
  cb_init "$out/$1"
  trap cb_cleanup EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  python3 "$bdir/scenarios.py" roles "$1" >"$CB_RUN/roles.txt"
  innocents=() antagonists=()
  local ctr role milli kind args
  while read -r ctr role milli kind args; do
    # shellcheck disable=SC2086  # args: the container's flags, split on purpose
    if [[ $kind == probe ]]; then
      cb_add "$ctr" "$ctr" ls "$milli" probe "$probe" --iters-per-us "$ipu" --warmup 0 $args
    else
      cb_add "$ctr" "$ctr" be "$milli" job $args
      [[ $role == innocent ]] && innocents+=("$ctr") || antagonists+=("$ctr")
    fi
  done < <(python3 "$bdir/scenarios.py" containers "$1" "$ncpu")
  bash "$here/colocation/colod-config.sh" "$CB_RUN" >"$CB_RUN/colod.yaml"
  cb_start_node peer
  local k mode
  for ((k = 1; k <= trials; k++)); do
    # Alternate the order, so neither side is always the first phase on a fresh node.
    for mode in $( ((k % 2)) && echo "nocolod colod" || echo "colod nocolod"); do
      bl_phase "t$k-$mode" "$mode"
      bl_sleep "$gap"
    done
  done
  cb_cleanup
  trap - EXIT
  python3 "$bdir/summarize.py" --scenario "$CB_RUN" || true
}

child=
bl_stop_child() {
  set +e
  if [[ -n $child ]] && kill -0 "$child" 2>/dev/null; then
    kill -TERM "$child"
    wait "$child"
  fi
  child=
}
trap bl_stop_child EXIT
# Asynchronous subshells ignore SIGINT in a non-interactive shell: the parent forwards it as TERM.
trap 'bl_stop_child; exit 130' INT
trap 'bl_stop_child; exit 143' TERM

per_phase=$((duration + 1 + gap + 4))
cb_log "${#chosen[@]} scenarios x $trials trials x 2 phases of ${duration}s: about $(((${#chosen[@]} * (trials * 2 * per_phase + 8) + 59) / 60)) min"
for s in "${chosen[@]}"; do
  cb_log "scenario $s"
  (bl_scenario "$s") &
  child=$!
  wait "$child" || cb_log "scenario $s ended with status $? (its results so far are kept)"
  child=
done
trap - EXIT INT TERM
echo "load after the run (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/meta.txt"
python3 "$bdir/summarize.py" "$out" | tee "$out/result.txt"
