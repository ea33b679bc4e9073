#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: on a fresh Debian 12 machine, install, build, start a simulated Kubernetes node
# (colod-testpeer: a runtime-side NRI peer running containers as real cgroups), run LS
# containers (colod-probe, redis-server), let BE pods (stress-ng) arrive annotated with
# colod.io/tier, and show LS latency alone, next to BE without colod, under the best-known peer's
# rule (Koordinator's CPU Suppress, scripts/bench/suppress), and with colod — live, then as a
# table and a PNG plot. Everything it starts is stopped on exit.
#   sudo scripts/demo.sh [--duration 20] [--rounds 1] [--out DIR] [--no-install]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/colocation/lib.sh
source "$root/scripts/bench/colocation/lib.sh"
CB_TAG=demo

duration=20 rounds=1 install=1 build=1 out=/tmp/colod-demo live_interval=2
usage() {
  cat <<USAGE
usage: sudo $0 [options]
  --duration S   seconds per phase (LS alone; LS+BE without colod; with Koordinator's CPU
                 Suppress rule; with colod), default $duration
  --rounds N     repeat the four phases N times (medians reported), default $rounds
  --out DIR      results, logs and the plot (default $out)
  --no-install   skip scripts/install-deps.sh
  --no-build     use the binaries already in \$COLOD_BUILD_DIR (default build-bench)
USAGE
}
while (($#)); do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-install) install=0; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 3 ;;
  esac
done
[[ $duration =~ ^[0-9]+$ && $duration -ge 6 && $duration -le 600 ]] || { echo "--duration: 6..600" >&2; exit 3; }
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 20 ]] || { echo "--rounds: 1..20" >&2; exit 3; }
[[ $(id -u) -eq 0 ]] || { echo "demo: run as root: sudo $0" >&2; exit 1; }

if ((install)); then
  cb_log "installing Debian packages (scripts/install-deps.sh)"
  bash "$root/scripts/install-deps.sh"
fi
rm -rf "$out"
cb_init "$out"
trap cb_cleanup EXIT

if ((build)); then
  cb_log "building (build dir $CB_BUILD; only the demo's targets)"
  cb_build colod-probe || cb_die "colod-probe does not build"
  cb_build colod-testpeer || cb_die "colod-testpeer (the simulated node) does not build"
  for t in colod colod-suppress coloctl colod-collect; do
    if cb_has_target "$t"; then cb_build "$t" || cb_log "warning: $t does not build; continuing without it"; fi
  done
fi
[[ -n $(cb_bin colod-probe) && -n $(cb_bin colod-testpeer) ]] ||
  cb_die "colod-probe and colod-testpeer must be built in $CB_BUILD"
probe=$(cb_bin colod-probe)
backend=peer
colod=$(cb_bin colod) coloctl=$(cb_bin coloctl) collect=$(cb_bin colod-collect)
have_colod=0 have_suppress=0
[[ -n $colod ]] && have_colod=1
[[ -n $(cb_bin colod-suppress) ]] && have_suppress=1

ipu=$("$probe" --calibrate-only | sed -n 's/^iters_per_us=//p')
cb_add ls-probe ls-probe ls 400 probe "$probe" --iters-per-us "$ipu"
cb_add ls-redis ls-redis ls 100 redis $((16400 + $$ % 1000))
cb_add be-cpu be-cpu be 1000 job --cpu 2
cb_add be-cache be-cache be 1000 job --cache 2
cb_add be-antagonist be-antagonist be 1000 job --vm 2 --vm-bytes 128M --cpu 1
cb_start_node "$backend"
if ((have_colod)); then
  bash "$root/scripts/bench/colocation/colod-config.sh" "$CB_RUN" >"$CB_RUN/colod.yaml"
fi
echo "command: $0 --duration $duration --rounds $rounds; backend $backend; colod $have_colod; suppress $have_suppress" >"$CB_RUN/meta.txt"

cat <<INTRO

  Simulated node ($backend): LS = colod-probe (open-loop requests, ~30% of the node) and
  redis-server (+ redis-benchmark bursts), tier "ls", 512 CPU shares together.
  BE = stress-ng --cpu / --cache pods (tier "be", 2 x 1024 shares: 4x LS) that arrive at the
  start of each BE phase like batch jobs, plus an antagonist pod (--vm) a third into it; all
  are removed at the phase end. Phases: LS alone; LS + BE, nothing acting; LS + BE under
  Koordinator's CPU Suppress rule (BE cpuset = 65 % of the node - LS use - system use, every
  second, through NRI); LS + BE with colod acting. The live table is "coloctl top": colod runs
  observe-only (metrics, no actions) except in its own phase.

INTRO

# Live view for SECONDS: coloctl top when colod runs, else the BPF collector's view.
live_view() {  # SECONDS WITH_COLOD
  local secs=$1 n=$(( $1 / live_interval ))
  if [[ $2 == 1 && -n $coloctl ]]; then
    bash "$root/scripts/bench/colocation/top.sh" "$coloctl" "$CB_RUN" "$secs" || sleep "$secs"
  elif [[ -n $collect ]]; then
    timeout $((secs + 5)) "$collect" --cgroup colobench --interval $((live_interval * 1000)) \
      --count "$n" 2>"$CB_RUN/collect.err" || { tail -3 "$CB_RUN/collect.err" >&2; sleep "$secs"; }
  else
    sleep "$secs"
  fi
}

phase() {  # TAG KIND
  local tag=$1 kind=$2 inject=$((duration / 3))
  local watching=0
  case $kind in
    solo) cb_log "$tag: LS alone for ${duration}s" ;;
    nocolod) cb_log "$tag: LS + BE, colod not acting, ${duration}s (antagonist at +${inject}s)" ;;
    suppress) cb_log "$tag: LS + BE under Koordinator's CPU Suppress rule, ${duration}s (antagonist at +${inject}s)"
      cb_start_suppress "$CB_RUN/suppress.log" || { cb_log "colod-suppress did not start; skipping"; return 0; }
      echo "$tag suppress-started $(cb_now_ns)" >>"$CB_RUN/triggers.txt" ;;
  esac
  # Without colod's actions the live view still comes from colod, in observe-only mode (BPF
  # metrics, no NRI updates), so all phases show the same table.
  if [[ $kind != colod && $have_colod == 1 && -n $coloctl ]]; then
    if cb_start_colod "$CB_RUN/colod.yaml" "$CB_RUN/colod-observe.log" --mode observe-only; then
      watching=1
    fi
  fi
  case $kind in
    colod) cb_log "$tag: LS + BE with colod acting through NRI, ${duration}s (antagonist at +${inject}s)"
      cb_start_colod "$CB_RUN/colod.yaml" "$CB_RUN/colod.log" || { cb_log "colod did not start; skipping"; return 0; }
      echo "$tag colod-started $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
      sleep 1 ;;
  esac
  local cpu0
  cpu0=$(cb_cpu_sample)
  cb_trigger "$tag" "$duration" ls-probe ls-redis
  if [[ $kind == solo ]]; then
    live_view $((duration - 1)) "$watching"
    cb_wait_done "$tag" 30 ls-probe ls-redis
  else
    cb_pods_start "$tag" "$duration" be-cpu be-cache
    live_view "$inject" "$([[ $kind == colod || $watching == 1 ]] && echo 1 || echo 0)"
    cb_pods_start "$tag" $((duration - inject)) be-antagonist
    live_view $((duration - inject - 1)) "$([[ $kind == colod || $watching == 1 ]] && echo 1 || echo 0)"
    cb_wait_done "$tag" 30 ls-probe ls-redis be-cpu be-cache be-antagonist
    cb_pods_stop be-cpu be-cache be-antagonist
  fi
  echo "$tag $(nproc) $cpu0 $(cb_cpu_sample)" >>"$CB_RUN/phase-cpu.txt"
  ((watching)) && cb_stop_colod
  if [[ $kind == suppress ]]; then
    cb_stop_suppress
    echo "$tag suppress-stopped $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
  fi
  if [[ $kind == colod ]]; then
    if [[ -n $coloctl ]]; then
      echo "--- coloctl decisions (most recent) ---"
      timeout 10 "$coloctl" --socket "$CB_RUN/colod.sock" decisions -n 8 || true
    fi
    cb_stop_colod
    echo "$tag colod-stopped $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
  fi
  python3 "$root/scripts/bench/colocation/summarize.py" --phase "$tag" "$CB_RUN" || true
  sleep 2
}

for r in $(seq 1 "$rounds"); do
  phase "r$r-solo" solo
  phase "r$r-nocolod" nocolod
  if ((have_suppress)); then
    phase "r$r-suppress" suppress
  fi
  if ((have_colod)); then
    phase "r$r-colod" colod
  fi
done
((have_colod)) || cb_log "colod is not built yet: its phase was left out"
((have_suppress)) || cb_log "colod-suppress is not built: the peer-rule phase was left out"

cb_cleanup
trap - EXIT
echo
python3 "$root/scripts/bench/colocation/summarize.py" "$CB_RUN" | grep -v -e '^phase ' -e '^colocation: ' |
  tee "$CB_RUN/result.txt"
bash "$root/scripts/bench/colocation/plot.sh" "$CB_RUN" "$CB_RUN/colocation.png" >/dev/null &&
  echo "plot: $CB_RUN/colocation.png"
