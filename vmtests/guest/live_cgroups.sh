# Live cgroups for the guest's scale scripts (sourced after tap.sh; busybox sh): the big-node
# guest's possible CPUs checked, and one cgroup per container with a process in it.

# check_possible <N>: one TAP check that the guest has N possible CPUs (0..N-1); sets $online.
check_possible() {
  possible=$(cat /sys/devices/system/cpu/possible)
  online=$(cat /sys/devices/system/cpu/online)
  if [ "$possible" = "0-$(($1 - 1))" ]; then
    ok "possible CPUs $possible (online $online)"
  else
    notok "possible CPUs 0-$(($1 - 1))" "the guest has $possible (online $online)"
  fi
}

# make_live_cgroups <root> <first> <n> <busy> <fifo prefix>: cgroups <root>/c<first>.. (n of
# them), a process in each that wakes every 0.2 s without forking (busybox read with a timeout
# on a fifo opened read-write: a container that does a little work now and then, as most do),
# the first <busy> of them spinning; then one TAP check that every cgroup holds its process
# (within 30 s). The processes' pids are in $live_pids.
make_live_cgroups() {
  lc_root=$1 lc_first=$2 lc_n=$3 lc_busy=$4 lc_fifo=$5
  mkdir -p "$lc_root"
  echo "+cpu +cpuset +memory" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
  echo "+cpu +cpuset +memory" >"$lc_root/cgroup.subtree_control" 2>/dev/null
  live_pids=""
  i=0
  while [ $i -lt "$lc_n" ]; do
    c=$lc_root/c$((lc_first + i))
    mkdir -p "$c"
    if [ $i -lt "$lc_busy" ]; then
      sh -c "echo \$\$ >$c/cgroup.procs; while :; do :; done" &
    else
      mkfifo "$lc_fifo$i"
      sh -c "echo \$\$ >$c/cgroup.procs; while :; do read -t 0.2 _ <>$lc_fifo$i; done" &
    fi
    live_pids="$live_pids $!"
    i=$((i + 1))
  done
  t=0
  while ! count_live && [ $t -lt 300 ]; do
    sleep 0.1
    t=$((t + 1))
  done
  if [ "$live" = "$lc_n" ]; then
    ok "$lc_n cgroups with a live process ($lc_busy busy)"
  else
    notok "$lc_n cgroups with a live process" "$live have one"
  fi
}

# count_live: true when every cgroup make_live_cgroups made holds a process; sets $live.
count_live() {
  live=0
  for f in "$lc_root"/c*/cgroup.procs; do
    # cgroupfs files have no size: read the first pid (a builtin, no fork per cgroup).
    read -r p <"$f" 2>/dev/null && [ -n "$p" ] && live=$((live + 1))
  done
  [ "$live" = "$lc_n" ]
}

# remove_live_cgroups: kills the processes make_live_cgroups started and removes their cgroups,
# the fifos and the root; then one TAP check that nothing is left. A killed process leaves its
# cgroup once the (emulated, loaded) CPUs have run its exit: up to 30 s for all of them.
remove_live_cgroups() {
  for p in $live_pids; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null  # the caller's other children are stopped by then
  t=0
  while [ -d "$lc_root" ] && [ $t -lt 60 ]; do
    for c in "$lc_root"/c*; do rmdir "$c" 2>/dev/null; done
    rmdir "$lc_root" 2>/dev/null || sleep 0.5
    t=$((t + 1))
  done
  rm -f "$lc_fifo"*
  if [ -d "$lc_root" ]; then
    left=0
    for c in "$lc_root"/c*; do [ -d "$c" ] && left=$((left + 1)); done
    notok "cgroups removed" "$left left in $lc_root"
  else
    ok "cgroups removed"
  fi
}
