#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# vmtests "scale" set (issue 17): the collector on a guest booted with few online but many
# possible CPUs (-smp 2,maxcpus=N). Per-CPU BPF maps and libbpf size by possible CPUs, so this is
# where a read side sized by the machine instead of the work shows: map memory, RSS and the time
# of a snapshot. Creates <cgroups> cgroups with a sleeping process each and <busy> of them busy,
# runs colod-collect-scale for a few seconds and prints its line (recorded in
# docs/benchmarks.md). Checks what must hold whatever the numbers: the guest has the possible
# CPUs asked for, the collector loads, sees every cgroup, reports its map memory, stays within
# the RSS budget, and the cgroups are cleaned up. TAP output.
#   sh scale_test.sh <possible CPUs> [cgroups] [busy] [seconds]
want=${1:?possible CPUs}
cgroups=${2:-200}
busy=${3:-4}
seconds=${4:-5}
# colod's RSS budget (issue 15/17: 32 MiB), for the collector alone, its default BPF map
# budget (daemon.bpf_map_budget_mib) and what all its maps may take (issue 17: 48 MiB).
rss_budget_mib=32
budget_mib=46
maps_goal_mib=48
bin=/vmtests/bin
root=/sys/fs/cgroup/vmscale

. /vmtests/tap.sh
. /vmtests/live_cgroups.sh
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

check_possible "$want"
# The workload: one cgroup per container, c0..c<cgroups - 1>, the first <busy> spinning.
make_live_cgroups $root 0 "$cgroups" "$busy" /tmp/scale.

# As colod does at start: the soft open-files limit raised to the hard one (the collector keeps
# three files open per cgroup, bounded by half the limit).
ulimit -n "$(ulimit -Hn)" 2>/dev/null

# probe <budget MiB> [probe flags]: one measured run; sets $line (the probe's numbers) and $err.
# cg_sched gets a copy for every possible CPU ($cpu_copies, default "possible"): the maps and the
# read of a node whose possible CPUs are all present, which this guest's 2 present CPUs stand
# in for. colod itself sizes by the present CPUs (the `cpu_copies=present` probe below).
probe() {
  budget=$1
  shift
  # (unless the flags name their own, as a SCALE_VARIANTS entry may)
  case " $* " in
  *" --cpu-copies "*) cc="" ;;
  *) cc="--cpu-copies ${cpu_copies:-possible}" ;;
  esac
  # shellcheck disable=SC2086 # $cc is zero or two words
  out=$($bin/colod-collect-scale --seconds "$seconds" --warmup-ticks 5 --max-cgroups 4096 \
    --map-budget-mib "$budget" --cgroup-root /sys/fs/cgroup $cc "$@" 2>/tmp/scale.err)
  rc=$?
  err=$(cat /tmp/scale.err)
  line=$(echo "$out" | grep '^probe:' | tail -n 1)
  echo "# budget ${budget} MiB $*: $line"
  [ -n "$err" ] && echo "$err" | sed 's/^/#   /'
  [ $rc = 0 ] && [ -n "$line" ]
}

# Without a budget (max_cgroups 4096 slots whatever the CPUs: the maps grow with them), then
# with colod's default (daemon.bpf_map_budget_mib: 46).
if probe 0; then
  ok "colod-collect-scale ran ${seconds} s at ${want} possible CPUs, no map budget"
else
  notok "colod-collect-scale ran, no map budget" "$err"
fi
unbudgeted=$line
if probe $budget_mib; then
  ok "colod-collect-scale ran ${seconds} s at ${want} possible CPUs, map budget $budget_mib MiB"
else
  notok "colod-collect-scale ran, map budget $budget_mib MiB" "$err"
fi
reported=$(field cgroups_reported_per_tick "$line")
map=$(field bpf_map_bytes "$line")
rss=$(field rss_mib "$line")
slots=$(field slots "$line")
# A cgroup is reported in a tick when it ran in it: every busy one, and the wakers about every
# other tick (a 0.2 s timer against a 0.1 s tick).
[ "${reported:-0}" -ge $((busy + (cgroups - busy) / 4)) ] &&
  ok "busy and waking cgroups reported ($reported per tick of $cgroups, $slots slots)" ||
  notok "busy and waking cgroups reported" "reported ${reported:-none} per tick of $cgroups"
# The slot maps fit the budget; with the maps not sized by slots (pairs, drops, ring buffer)
# all of them within the issue's 48 MiB.
limit=$((maps_goal_mib * 1024 * 1024))
if [ "${map:-0}" -gt 0 ] && [ "$map" -le $limit ]; then
  ok "BPF maps within $maps_goal_mib MiB: $map bytes ($slots slots; without the budget $(field bpf_map_bytes "$unbudgeted"))"
else
  notok "BPF maps within $maps_goal_mib MiB (budget $budget_mib)" "bpf_map_bytes=${map:-none}, slots ${slots:-none}"
fi
if [ -n "$rss" ] && awk -v r="$rss" -v b=$rss_budget_mib 'BEGIN{exit !(r <= b)}'; then
  ok "collector RSS ${rss} MiB within ${rss_budget_mib} MiB at ${want} possible CPUs"
else
  notok "collector RSS within ${rss_budget_mib} MiB" "rss_mib=${rss:-none} at ${want} possible CPUs"
fi
budgeted=$line
# The same, with cg_sched's per-CPU copies summed in userspace (as before the schedsum
# iterator): this 6.1 guest kernel has what the iterator needs, so where the live cgroups'
# per-CPU copies pass 1 MiB (CollectorOptions::user_read_budget_bytes: 64 possible CPUs and up
# here) colod sums in the kernel and reads a record per cgroup, not one per cgroup per possible
# CPU; with 8 or fewer it reads them from userspace, which costs less there.
probe $budget_mib --user-sums
usersums=$line
kread=$(field read_bytes_per_tick "$budgeted")
uread=$(field read_bytes_per_tick "$usersums")
sums=$(field sums "$budgeted")
if [ "$want" -ge 64 ]; then
  # The kernel adds the copies of the CPUs each cgroup ran on (cg_cpus marks), not every
  # possible CPU's: at most the online CPUs' a record, whatever $want is.
  copies=$(field sched_cpu_copies_per_tick "$budgeted")
  entries=$(field sched_entries_read_per_tick "$budgeted")
  ncpu_online=$(grep -c "^processor" /proc/cpuinfo)
  if awk -v c="${copies:-0}" -v e="${entries:-0}" -v o="$ncpu_online" \
    'BEGIN{exit !(c > 0 && c <= e * o)}'; then
    ok "the kernel sum adds $copies per-CPU copies a tick for $entries cgroups ($ncpu_online online of $want possible)"
  else
    notok "the kernel sum adds only the CPUs the cgroups ran on" \
      "copies=${copies:-none} for ${entries:-none} cgroups, $ncpu_online online of $want possible"
  fi
  if [ "$sums" = kernel ] && [ "$(field sums "$usersums")" = user ] &&
    awk -v k="${kread:-0}" -v u="${uread:-0}" 'BEGIN{exit !(k > 0 && u > 0 && k * 8 < u)}'; then
    ok "cg_sched summed in the kernel: $kread bytes read per tick, $uread summed in userspace"
  else
    notok "cg_sched summed in the kernel, reading far less" \
      "sums=$sums read=$kread; user sums read=$uread"
  fi
elif [ "$want" -le 8 ]; then
  [ "$sums" = user ] && ok "cg_sched read from userspace at $want possible CPUs ($kread bytes per tick)" ||
    notok "cg_sched read from userspace at $want possible CPUs" "sums=$sums"
else
  [ -n "$sums" ] && ok "cg_sched read ($sums sums, $kread bytes per tick) at $want possible CPUs" ||
    notok "cg_sched read at $want possible CPUs" "no sums field"
fi
# As colod sizes cg_sched in this VM: a copy per present CPU, so the possible CPUs it may hot-add
# cost no memory: 4096 slots take what they take on a 2-CPU node, whatever $want is.
cpu_copies=present probe 0
cpu_copies=possible
present_line=$line
present=$(awk -F'[-,]' '{ m = 0; for (i = 1; i <= NF; i++) if ($i + 0 > m) m = $i + 0; print m + 1 }' \
  /sys/devices/system/cpu/present)
pcopies=$(field cpu_copies "$present_line")
pmap=$(field bpf_map_bytes "$present_line")
if [ "${pcopies:-0}" = "$present" ] && [ "${pmap:-0}" -gt 0 ] && [ "$pmap" -le $((8 * 1024 * 1024)) ]; then
  ok "cg_sched sized for the $present present CPUs of $want possible: $pmap bytes of maps for 4096 slots"
else
  notok "cg_sched sized for the present CPUs" "cpu_copies=${pcopies:-none} (present $present), bpf_map_bytes=${pmap:-none}"
fi
echo "scale-vm: possible_cpus=$want online=$online cgroups=$cgroups busy=$busy budget_mib=0 $(echo "$present_line" | sed 's/^probe: //')"
echo "scale-vm: possible_cpus=$want online=$online cgroups=$cgroups busy=$busy budget_mib=0 $(echo "$unbudgeted" | sed 's/^probe: //')"
echo "scale-vm: possible_cpus=$want online=$online cgroups=$cgroups busy=$busy budget_mib=$budget_mib $(echo "$usersums" | sed 's/^probe: //')"
echo "scale-vm: possible_cpus=$want online=$online cgroups=$cgroups busy=$busy budget_mib=$budget_mib $(echo "$budgeted" | sed 's/^probe: //')"

# Variants side by side (benchmarks, not checks): SCALE_VARIANTS="flags;flags;..." runs a probe
# with each set of flags ("-": none) under the default map budget, round-robin SCALE_ROUNDS
# times, one "scale-vm-variant:" line each. E.g. (docs/benchmarks.md):
#   vmtests/run --tests scale --exec "SCALE_VARIANTS='-;--no-cpu-marks;--no-files' sh /vmtests/scale_test.sh 255"
if [ -n "${SCALE_VARIANTS:-}" ]; then
  r=0
  while [ $r -lt "${SCALE_ROUNDS:-2}" ]; do
    echo "$SCALE_VARIANTS" | tr ';' '\n' | while read -r flags; do
      [ "$flags" = - ] && flags=""
      # shellcheck disable=SC2086 # the flags are words
      probe $budget_mib $flags &&
        echo "scale-vm-variant: possible_cpus=$want round=$r flags=${flags:--} $(echo "$line" | sed 's/^probe: //')"
    done
    r=$((r + 1))
  done
fi

remove_live_cgroups
echo "1..$n"
[ $fails = 0 ]
