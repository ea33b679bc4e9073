# SPDX-License-Identifier: Apache-2.0
# Shared by scripts/bench/colocation.sh and scripts/demo.sh: build, simulated node (the Go runtime
# peer colod-testpeer, or plain cgroups when the peer is not built), workload containers driven
# through FIFOs (worker.sh), colod start/stop. Source it; it defines cb_* functions only.
# Every wait is bounded; cb_cleanup (called from the caller's EXIT trap) stops what was started.

CB_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CB_ROOT=$(cd "$CB_HERE/../../.." && pwd)
CB_BUILD=${COLOD_BUILD_DIR:-$CB_ROOT/build-bench}
CB_RUN=                 # run dir (FIFOs, outputs, logs); set by cb_init
CB_BACKEND=             # peer | cgroup
CB_PEER_PID=
CB_COLOD_PID=
CB_SUPPRESS_PID=
CB_HOG_DIRS=()          # foreign-hog cgroups to remove
CB_CG_DIRS=()           # cgroup backend: dirs to remove
CB_WORKER_PIDS=()       # cgroup backend: worker pids
CB_NAMES=()             # container names, in start order
# cpu.shares of the benchmark's top cgroup. In a cgroup v1 root every task is its own entity of
# weight 1024, so other work on the machine (a compile: 10 tasks) would outweigh the whole
# simulated node at 1024. A high weight keeps the experiment about LS vs BE.
CB_NODE_SHARES=${CB_NODE_SHARES:-16384}
declare -A CB_SPEC=()   # name -> "pod|tier|milli|kind|args..."

cb_log() { printf '%s [%s] %s\n' "$(date +%H:%M:%S)" "${CB_TAG:-colocation}" "$*" >&2; }
cb_die() { cb_log "error: $*"; exit 1; }
cb_now_ns() { date +%s%N; }
cb_count() {  # PATTERN FILE: matching lines, 0 when the file does not exist yet
  local n
  n=$(grep -c -e "$1" "$2" 2>/dev/null) || true
  echo "${n:-0}"
}

cb_init() {  # RUNDIR
  CB_RUN=$1
  mkdir -p "$CB_RUN"
  [[ $(id -u) -eq 0 ]] || cb_die "must run as root (creates cgroups)"
}

# Configures the build dir once and builds only the given targets, -j2 (shared 2-core machine).
cb_build() {  # TARGETS...
  if [[ ! -f $CB_BUILD/CMakeCache.txt ]]; then
    cmake -S "$CB_ROOT" -B "$CB_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$CB_RUN/cmake.log" 2>&1 ||
      { tail -20 "$CB_RUN/cmake.log" >&2; cb_die "cmake configure failed (log: $CB_RUN/cmake.log)"; }
  fi
  local t i=0 t0
  for t in "$@"; do
    # Progress on the terminal: a first build takes minutes on 2 cores.
    i=$((i + 1))
    t0=$SECONDS
    cb_log "building $t ($i of $#; compiler output in $CB_RUN/build.log)"
    cmake --build "$CB_BUILD" -j "${COLOD_JOBS:-2}" --target "$t" >>"$CB_RUN/build.log" 2>&1 ||
      { cb_log "build of $t failed (log: $CB_RUN/build.log)"; return 1; }
    cb_log "built $t in $((SECONDS - t0)) s"
  done
}

cb_has_target() {  # TARGET: is it known to the build system?
  # No grep -q: under pipefail its early exit would SIGPIPE cmake and fail the pipeline.
  cmake --build "$CB_BUILD" --target help 2>/dev/null | grep -E "^\.\.\. $1( |$)" >/dev/null
}

cb_stop_pids() {  # PID...: TERM each, up to 10 s to exit, then KILL (empty arguments skipped)
  local p
  for p in "$@"; do
    [[ -n $p ]] || continue
    kill -TERM "$p" 2>/dev/null || continue
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}
cb_wait_socket() {  # PATH: up to 10 s for a unix socket to appear; fails if it does not
  for _ in $(seq 1 100); do [[ -S $1 ]] && return 0; sleep 0.1; done
  [[ -S $1 ]]
}
cb_bin() {  # NAME -> path of a built binary, or empty
  local p
  for p in "$CB_BUILD/userspace/probe/$1" "$CB_BUILD/nri/testpeer/$1" \
           "$CB_BUILD/userspace/daemon/$1" "$CB_BUILD/userspace/ctl/$1" \
           "$CB_BUILD/userspace/collectview/$1" "$CB_BUILD/scripts/bench/suppress/$1"; do
    [[ -x $p ]] && { echo "$p"; return 0; }
  done
  return 0
}

# Declares a container: cb_add NAME POD TIER MILLICPU KIND [ARGS...] (see worker.sh for KIND).
# KIND job (stress-ng ARGS): a container that arrives as a new pod when a phase asks for it
# (cb_pods_start: RunPodSandbox, CreateContainer, StartContainer through the peer) and is removed
# with its pod at the phase end (cb_pods_stop); the others live for the whole run.
cb_add() {
  local name=$1 pod=$2 tier=$3 milli=$4
  shift 4
  CB_NAMES+=("$name")
  CB_SPEC[$name]="$pod|$tier|$milli|$*"
}

cb_set_shares() {  # DIR SHARES: cpu.shares (v1) or the equivalent cpu.weight (v2, runc's formula)
  if [[ -f $1/cpu.shares ]]; then
    echo "$2" >"$1/cpu.shares"
  elif [[ -f $1/cpu.weight ]]; then
    echo $((1 + ($2 - 2) * 9999 / 262142)) >"$1/cpu.weight"
  else
    cb_log "warning: no cpu.shares/cpu.weight in $1"
  fi
}

cb_is_job() { [[ ${CB_SPEC[$1]} == *"|job"* ]]; }
cb_resident_count() { local n c=0; for n in "${CB_NAMES[@]}"; do cb_is_job "$n" || c=$((c + 1)); done; echo $c; }

cb_shares() { local m=$1; local s=$((m * 1024 / 1000)); ((s < 2)) && s=2; echo $s; }

# Starts every declared container on the simulated node. BACKEND: peer (needs colod-testpeer)
# or cgroup (plain cgroups, no NRI: enough for the phases without colod).
cb_start_node() {  # BACKEND
  CB_BACKEND=$1
  local name
  for name in "${CB_NAMES[@]}"; do
    cb_is_job "$name" && continue
    rm -f "$CB_RUN/fifo.$name"
    mkfifo "$CB_RUN/fifo.$name"
  done
  if [[ $CB_BACKEND == peer ]]; then
    cb_start_peer
  else
    cb_start_cgroups
  fi
}

cb_scenario_json() {  # the declared containers as a colod-testpeer scenario
  python3 - "$CB_RUN" "$CB_HERE/worker.sh" "${CB_NAMES[@]}" <<'PY' 3<<<"$(for n in "${CB_NAMES[@]}"; do echo "$n|${CB_SPEC[$n]}"; done)"
import json, os, sys
run, worker, names = sys.argv[1], sys.argv[2], sys.argv[3:]
spec = {}
with os.fdopen(3) as f:
    for line in f.read().splitlines():
        name, pod, tier, milli, args = line.split("|", 4)
        spec[name] = (pod, tier, int(milli), args.split())
pods, ctrs, tl = [], [], []
t = 0
for n in names:
    pod, tier, milli, args = spec[n]
    kind = args[0]
    if kind == "job":
        # Arrives per phase (pods.py start): defined here, not in the timeline.
        command = ["bash", os.path.join(os.path.dirname(worker), "job.sh"), run, n] + args[1:]
    else:
        command = ["bash", worker, f"{run}/fifo.{n}", run, n] + args
    pods.append({"name": pod, "namespace": "bench", "qos": "burstable",
                 "annotations": {"colod.io/tier": tier}})
    ctrs.append({"name": n, "pod": pod,
                 "command": command,
                 "annotations": {"colod.io/tier": tier},
                 "resources": {"cpu_request_milli": milli}})
    if kind != "job":
        tl += [{"at_ms": t, "op": "run_pod", "pod": pod},
               {"at_ms": t, "op": "create_start", "container": n}]
print(json.dumps({"pods": pods, "containers": ctrs, "timeline": tl}, indent=1))
PY
}

cb_start_peer() {
  local peer
  peer=$(cb_bin colod-testpeer)
  [[ -n $peer ]] || cb_die "colod-testpeer is not built"
  cb_scenario_json >"$CB_RUN/scenario.json"
  CB_PEER_PARENT=colobench-$$
  "$peer" --socket "$CB_RUN/nri.sock" --control "$CB_RUN/peer.ctl" --log "$CB_RUN/peer.log" \
    --cgroup-parent "$CB_PEER_PARENT" --scenario "$CB_RUN/scenario.json" \
    >"$CB_RUN/peer.stdout" 2>&1 &
  CB_PEER_PID=$!
  local want i
  want=$(cb_resident_count)
  for i in $(seq 1 200); do  # <= 20 s
    kill -0 "$CB_PEER_PID" 2>/dev/null || { tail -5 "$CB_RUN/peer.stdout" "$CB_RUN/peer.log" >&2; cb_die "colod-testpeer exited"; }
    (( $(cb_count '"event":"container-started"' "$CB_RUN/peer.log") >= want )) && break
    sleep 0.1
  done
  (( $(cb_count '"event":"container-started"' "$CB_RUN/peer.log") >= want )) ||
    cb_die "colod-testpeer did not start $want containers in 20 s (log: $CB_RUN/peer.log)"
  cb_kubelet_pod_shares
  cb_log "node: colod-testpeer pid $CB_PEER_PID, $want resident containers, $((${#CB_NAMES[@]} - want)) arriving per phase (cgroup parent $CB_PEER_PARENT)"
}

# kubelet sets a pod cgroup's cpu.shares to the sum of its containers' requests; the peer creates
# only the directories. Without this every pod would weigh 1024 and the LS:BE ratio would be
# set by the pod count, not the requests.
cb_kubelet_pod_shares() {
  local list name dir
  list=$(python3 "$CB_HERE/peerctl.py" "$CB_RUN/peer.ctl" '{"op":"list"}') || cb_die "peer list failed"
  for name in "${CB_NAMES[@]}"; do
    cb_is_job "$name" && continue
    dir=$(python3 -c '
import json, sys
r = json.loads(sys.argv[1])["result"]
for c in r.get("containers", []):
    if c.get("name") == sys.argv[2]:
        print(c.get("cgroup_rel", "").strip("/"))
' "$list" "$name")
    if [[ -n $dir ]]; then
      if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then dir=/sys/fs/cgroup/$dir
      else dir=/sys/fs/cgroup/cpu/$dir; fi
    fi
    [[ -n $dir && -d $dir ]] || { cb_log "warning: no cgroup dir for $name in peer list"; continue; }
    local milli=${CB_SPEC[$name]#*|*|}
    milli=${milli%%|*}
    cb_set_shares "$(dirname "$dir")" "$(cb_shares "$milli")"
    echo "$name $dir" >>"$CB_RUN/cgroups.txt"
  done
  # The peer's parent sits in the root cgroup: weigh it like a node (see CB_NODE_SHARES), and
  # kubepods like kubelet does (allocatable CPUs x 1024).
  local top=${dir%%/kubepods/*}
  if [[ -n $dir && $top != "$dir" ]]; then
    cb_set_shares "$top" "$CB_NODE_SHARES"
    cb_set_shares "$top/kubepods" $(($(nproc) * 1024))
  fi
}

cb_start_cgroups() {
  local base name pod tier milli args
  if [[ -d /sys/fs/cgroup/cpu && ! -f /sys/fs/cgroup/cgroup.controllers ]]; then
    base=/sys/fs/cgroup/cpu/colobench-$$
  else
    base=/sys/fs/cgroup/colobench-$$
    mkdir -p "$base"
    echo +cpu >"$base/cgroup.subtree_control" 2>/dev/null || true
  fi
  mkdir -p "$base"
  CB_CG_DIRS+=("$base")
  cb_set_shares "$base" "$CB_NODE_SHARES"
  for name in "${CB_NAMES[@]}"; do
    cb_is_job "$name" && continue  # pods arrive through the peer only
    IFS='|' read -r pod tier milli args <<<"${CB_SPEC[$name]}"
    local dir=$base/$name s
    s=$(cb_shares "$milli")
    mkdir -p "$dir"
    CB_CG_DIRS=("$dir" "${CB_CG_DIRS[@]}")
    cb_set_shares "$dir" "$s"
    # shellcheck disable=SC2086
    setsid bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$dir" \
      bash "$CB_HERE/worker.sh" "$CB_RUN/fifo.$name" "$CB_RUN" "$name" $args &
    CB_WORKER_PIDS+=($!)
    echo "$name $dir" >>"$CB_RUN/cgroups.txt"
  done
  cb_log "node: plain cgroups under $base (no NRI runtime: colod phases unavailable)"
}

# CPU accounting of a phase, to tell a noisy measurement from a real one: prints
# "WALL_NS BUSY_NS NODE_NS": wall clock, CPU time of the whole machine (/proc/stat, all but idle
# and iowait), CPU time of the simulated node's cgroup (cpuacct.usage on v1, cpu.stat on v2).
cb_cpu_sample() {
  local busy node=0 top
  busy=$(awk '/^cpu / {b = 0; for (i = 2; i <= NF; i++) if (i != 5 && i != 6) b += $i;
                       printf "%.0f", b * 1e9 / '"$(getconf CLK_TCK)"'}' /proc/stat)
  top=$(awk 'NR == 1 {print $2}' "$CB_RUN/cgroups.txt" 2>/dev/null)
  if [[ $top == */kubepods/* ]]; then top=${top%%/kubepods/*}; else top=$(dirname "$top"); fi
  if [[ $top == /sys/fs/cgroup/cpu/* ]]; then
    local acct=/sys/fs/cgroup/cpuacct/${top#/sys/fs/cgroup/cpu/}
    [[ -f $acct/cpuacct.usage ]] && node=$(<"$acct/cpuacct.usage")
  elif [[ -f $top/cpu.stat ]]; then
    node=$(awk '/^usage_usec/ {print $2 * 1000}' "$top/cpu.stat")
  fi
  echo "$(cb_now_ns) $busy $node"
}

# Tells containers to run their workload for SECONDS under TAG (does not wait). $CB_TRIGGER_EXTRA,
# if set, is passed on to the workload (worker.sh: extra probe flags).
cb_trigger() {  # TAG SECONDS NAMES...
  local tag=$1 secs=$2 name at
  shift 2
  for name in "$@"; do
    rm -f "$CB_RUN/$tag.$name.done"
    # Stamped before the write: the worker may start its workload before this shell, starved
    # beside it, gets back (busy phases read colod's write up to 260 ms before a stamp taken
    # after the write, and counted those reactions as 0).
    at=$(cb_now_ns)
    timeout 10 bash -c 'echo "run $2 $3 $4" >"$1"' _ "$CB_RUN/fifo.$name" "$tag" "$secs" "${CB_TRIGGER_EXTRA:-}" ||
      cb_die "container $name does not read its FIFO"
    echo "$tag $name $at" >>"$CB_RUN/triggers.txt"
  done
}

cb_wait_done() {  # TAG TIMEOUT_S NAMES...
  local tag=$1 limit=$2 name i
  shift 2
  for name in "$@"; do
    for ((i = 0; i < limit * 10; i++)); do
      [[ -f $CB_RUN/$tag.$name.done ]] && break
      sleep 0.1
    done
    [[ -f $CB_RUN/$tag.$name.done ]] || cb_die "$name did not finish $tag within ${limit}s"
  done
}

# Policy traces: with CB_RECORD_TRACES=1 every colod run is recorded (coloctl record) into
# $CB_RUN/$CB_TRACE_NAME.trace, beside a .clock file (wall and monotonic ns taken together: the
# trace's round times are colod's steady clock) for colocation/round_gaps.py.
CB_RECORD_TRACES=${CB_RECORD_TRACES:-0}
CB_TRACE_NAME=
CB_RECORD_PID=

cb_start_record() {  # CONTROL_SOCKET
  local coloctl
  coloctl=$(cb_bin coloctl)
  [[ -n $coloctl && -n $CB_TRACE_NAME ]] || { cb_log "trace not recorded (no coloctl or name)"; return 0; }
  python3 -c 'import time; print(time.time_ns(), time.monotonic_ns())' >"$CB_RUN/$CB_TRACE_NAME.trace.clock"
  "$coloctl" --socket "$1" record --seconds 0 "$CB_RUN/$CB_TRACE_NAME.trace" \
    >"$CB_RUN/$CB_TRACE_NAME.trace.log" 2>&1 &
  CB_RECORD_PID=$!
}

cb_stop_record() {
  [[ -n $CB_RECORD_PID ]] || return 0
  kill -INT "$CB_RECORD_PID" 2>/dev/null || true
  local i
  for i in $(seq 1 50); do kill -0 "$CB_RECORD_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$CB_RECORD_PID" 2>/dev/null || true
  wait "$CB_RECORD_PID" 2>/dev/null || true
  CB_RECORD_PID=
}

# Starts colod against the peer's NRI socket (act mode) and waits until the peer reports it
# synchronized. Returns 1 if colod is not built or does not connect within 20 s.
cb_start_colod() {  # CONFIG_FILE LOG_FILE [EXTRA COLOD ARGS...]
  local colod synced0 i
  colod=$(cb_bin colod)
  [[ -n $colod ]] || { cb_log "colod is not built"; return 1; }
  synced0=$(cb_count '"event":"plugin-synchronized"' "$CB_RUN/peer.log")
  "$colod" --config "$1" "${@:3}" >>"$2" 2>&1 &
  CB_COLOD_PID=$!
  for i in $(seq 1 200); do
    kill -0 "$CB_COLOD_PID" 2>/dev/null || { CB_COLOD_PID=; tail -5 "$2" >&2; cb_log "colod exited"; return 1; }
    if (( $(cb_count '"event":"plugin-synchronized"' "$CB_RUN/peer.log") > synced0 )); then
      if ((CB_RECORD_TRACES)); then
        cb_start_record "$(sed -n 's/^ *control_socket: *//p' "$1" | head -1)"
      fi
      return 0
    fi
    sleep 0.1
  done
  cb_log "colod did not synchronize with the peer within 20 s"
  cb_stop_colod
  return 1
}

cb_stop_colod() {
  cb_stop_record
  if [[ -n $CB_COLOD_PID ]] && kill -0 "$CB_COLOD_PID" 2>/dev/null; then
    kill -TERM "$CB_COLOD_PID"
    local i
    for i in $(seq 1 100); do kill -0 "$CB_COLOD_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$CB_COLOD_PID" 2>/dev/null && { cb_log "colod did not stop in 10 s: SIGKILL"; kill -KILL "$CB_COLOD_PID"; }
    wait "$CB_COLOD_PID" 2>/dev/null
  fi
  CB_COLOD_PID=
}

cb_cleanup() {
  set +e
  cb_stop_colod
  cb_stop_suppress
  cb_hog_stop
  local name
  for name in "${CB_NAMES[@]}"; do
    [[ -p $CB_RUN/fifo.$name ]] && timeout 2 bash -c 'echo exit >"$1"' _ "$CB_RUN/fifo.$name" 2>/dev/null
  done
  if [[ -n $CB_PEER_PID ]] && kill -0 "$CB_PEER_PID" 2>/dev/null; then
    kill -TERM "$CB_PEER_PID"
    local i
    for i in $(seq 1 100); do kill -0 "$CB_PEER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$CB_PEER_PID" 2>/dev/null
    wait "$CB_PEER_PID" 2>/dev/null
  fi
  local pid
  for pid in "${CB_WORKER_PIDS[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null
  done
  sleep 0.3
  for pid in "${CB_WORKER_PIDS[@]}"; do
    kill -KILL -- "-$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  local d p
  for d in "${CB_CG_DIRS[@]}"; do
    # Anything a workload forked into its own process group is still in the cgroup.
    if [[ -f $d/cgroup.procs ]]; then
      while read -r p; do kill -KILL "$p" 2>/dev/null; done <"$d/cgroup.procs"
    fi
  done
  sleep 0.2
  for d in "${CB_CG_DIRS[@]}"; do
    [[ -d $d ]] && rmdir "$d" 2>/dev/null
  done
  CB_WORKER_PIDS=()
  CB_CG_DIRS=()
}

# --- BE as new pods, the peer-rule controller, the foreign hog (issue 15 item 4) ---------------

# Runs job containers as new pods for SECONDS under TAG: for each NAME, RunPodSandbox, the pod's
# cpu.shares (kubelet's part), CreateContainer, StartContainer through the peer (pods.py); the
# arrival time goes to triggers.txt ("TAG NAME TS_NS", taken before CreateContainer).
# The harness's own steps (pods arriving, usage samples) run at nice -10: beside two BE hogs that
# the node's top cgroup (--node-shares) outweighs, a python3 at nice 0 took 5-22 s to start
# and sample (session 19), and the dynamic phase's LS steps slid past the BE pods' lifetime.
# The harness's python is the system's: a version manager's shim first on PATH (pyenv's, on
# this session's machine) is a bash script that runs several processes before python, and beside
# the BE hogs it took 6-18 s to start against 0.05-0.18 s for /usr/bin/python3, even at nice
# -10: the dynamic-nocolod phase's LS steps began after its BE pods had ended (be_harvest 0.00,
# session 49).
CB_PYTHON=${CB_PYTHON:-$(if [[ -x /usr/bin/python3 ]]; then echo /usr/bin/python3; else command -v python3; fi)}
cb_harness() { nice -n -10 "$@"; }

cb_pods_start() {  # TAG SECONDS NAMES...
  local tag=$1 secs=$2
  shift 2
  cb_harness "$CB_PYTHON" "$CB_HERE/pods.py" start "$CB_RUN" "$tag" "$secs" "$@" ||
    cb_die "starting pods $* for $tag failed (log: $CB_RUN/peer.log)"
}

cb_pods_stop() {  # NAMES...: StopPodSandbox + RemovePodSandbox (its containers with it)
  cb_harness "$CB_PYTHON" "$CB_HERE/pods.py" stop "$CB_RUN" "$@" || cb_log "warning: removing pods $* failed"
}

cb_usage_sample() {  # LABEL: every container's CPU time now, appended to usage.txt
  cb_harness "$CB_PYTHON" "$CB_HERE/pods.py" usage "$CB_RUN" "$1" || cb_log "warning: usage sample $1 failed"
}

cb_peer_cpus() {  # CPUS NAMES...: a kubelet update of the containers' cpuset through the peer
  local cpus=$1 name
  shift
  for name in "$@"; do
    "$CB_PYTHON" "$CB_HERE/peerctl.py" "$CB_RUN/peer.ctl" \
      "{\"op\":\"update\",\"container\":\"$name\",\"resources\":{\"cpus\":\"$cpus\"}}" >/dev/null ||
      cb_die "cpuset update of $name failed"
  done
}

# Starts the Koordinator CPU Suppress controller (scripts/bench/suppress) as a second NRI plugin
# and waits for its Synchronize. Returns 1 if it is not built or does not connect within 20 s.
cb_start_suppress() {  # LOG [EXTRA ARGS...]
  local bin synced0 i
  bin=$(cb_bin colod-suppress)
  [[ -n $bin ]] || { cb_log "colod-suppress is not built"; return 1; }
  synced0=$(cb_count '"event":"plugin-synchronized"' "$CB_RUN/peer.log")
  "$bin" --socket "$CB_RUN/nri.sock" "${@:2}" >>"$1" 2>&1 &
  CB_SUPPRESS_PID=$!
  for i in $(seq 1 200); do
    kill -0 "$CB_SUPPRESS_PID" 2>/dev/null || { CB_SUPPRESS_PID=; tail -5 "$1" >&2; cb_log "colod-suppress exited"; return 1; }
    (( $(cb_count '"event":"plugin-synchronized"' "$CB_RUN/peer.log") > synced0 )) && return 0
    sleep 0.1
  done
  cb_log "colod-suppress did not synchronize within 20 s"
  cb_stop_suppress
  return 1
}

cb_stop_suppress() {
  if [[ -n $CB_SUPPRESS_PID ]] && kill -0 "$CB_SUPPRESS_PID" 2>/dev/null; then
    kill -TERM "$CB_SUPPRESS_PID"
    local i
    for i in $(seq 1 50); do kill -0 "$CB_SUPPRESS_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$CB_SUPPRESS_PID" 2>/dev/null && kill -KILL "$CB_SUPPRESS_PID"
    wait "$CB_SUPPRESS_PID" 2>/dev/null || true
  fi
  CB_SUPPRESS_PID=
}

# The simulated node's top cgroup (colobench-<pid>) in the cpu hierarchy, from cgroups.txt.
cb_node_top() {
  local d
  d=$(awk 'NR == 1 {print $2}' "$CB_RUN/cgroups.txt" 2>/dev/null)
  [[ $d == */kubepods/* ]] && echo "${d%%/kubepods/*}"
}

# Work colod does not control: a stress-ng --cpu 1 hog in its own cgroup beside kubepods under
# the node's top cgroup, at the default weight (1024; kubepods weighs CPUs x 1024), like a
# system daemon or a process in system.slice on a real node. Runs SECONDS.
cb_hog_start() {  # TAG SECONDS
  local top dir
  top=$(cb_node_top)
  [[ -n $top && -d $top ]] || cb_die "no node top cgroup for the foreign hog"
  dir=$top/foreign-hog
  mkdir -p "$dir"
  CB_HOG_DIRS+=("$dir")
  cb_set_shares "$dir" 1024
  if [[ $dir == /sys/fs/cgroup/cpu/* && -d /sys/fs/cgroup/cpuacct ]]; then
    local acct=/sys/fs/cgroup/cpuacct/${dir#/sys/fs/cgroup/cpu/}
    mkdir -p "$acct"
    CB_HOG_DIRS+=("$acct")
  fi
  setsid bash -c 'for d in "${@:2}"; do echo $$ >"$d/cgroup.procs"; done; exec stress-ng --cpu 1 --timeout "$1" --metrics-brief' \
    _ "$2" "${CB_HOG_DIRS[@]}" >"$CB_RUN/$1.foreign-hog.log" 2>&1 &
  CB_HOG_PID=$!
  echo "$1 foreign-hog $(cb_now_ns)" >>"$CB_RUN/triggers.txt"
}

# Runs under the callers' set -e: every kill/wait of what may be gone already is allowed to fail.
cb_hog_stop() {
  if [[ -n ${CB_HOG_PID:-} ]]; then
    kill -TERM -- "-$CB_HOG_PID" 2>/dev/null || true
    local i
    for i in $(seq 1 30); do kill -0 "$CB_HOG_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$CB_HOG_PID" 2>/dev/null || true
    wait "$CB_HOG_PID" 2>/dev/null || true
    CB_HOG_PID=
  fi
  local d p
  for d in "${CB_HOG_DIRS[@]}"; do
    if [[ -f $d/cgroup.procs ]]; then
      while read -r p; do kill -KILL "$p" 2>/dev/null || true; done <"$d/cgroup.procs"
    fi
  done
  for d in "${CB_HOG_DIRS[@]}"; do
    for _ in 1 2 3 4 5; do rmdir "$d" 2>/dev/null && break; [[ -d $d ]] || break; sleep 0.2; done
  done
  CB_HOG_DIRS=()
}
