#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""BE pods arriving and leaving through colod-testpeer's control socket, and CPU-time samples.

  pods.py start RUNDIR TAG SECONDS NAME...  for each NAME (a container of kind job in
      RUNDIR/scenario.json, alone in its pod of the same name): RunPodSandbox, the pod cgroup's
      cpu.shares = the container's request (kubelet's part), CreateContainer, StartContainer.
      "TAG NAME TS_NS" goes to RUNDIR/triggers.txt, TS taken before CreateContainer (an
      admission placement at creation then shows as reaction 0). With CB_BE_CPUS set, each
      container's cpuset is updated to it right after StartContainer (the split phase: BE
      placed by the harness, as a static split would).
  pods.py stop RUNDIR NAME...               StopPodSandbox + RemovePodSandbox of each pod
  pods.py usage RUNDIR LABEL                one line "LABEL TS_NS NCPU name=ns ..." of every
      container's CPU time (cpuacct.usage on v1, cpu.stat usage_usec on v2) in RUNDIR/usage.txt
Exit 1 on a failed op (the reply is printed to stderr).
"""
import json
import os
import socket
import sys
import time

CGROUP = "/sys/fs/cgroup"


class Peer:
    def __init__(self, path, timeout=30.0):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.f = self.s.makefile("rwb")

    def op(self, **kw):
        self.f.write(json.dumps(kw).encode() + b"\n")
        self.f.flush()
        line = self.f.readline()
        if not line:
            raise OSError("peer closed the control socket")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise RuntimeError(f"{kw.get('op')} {kw.get('pod') or kw.get('container')}: "
                               f"{reply.get('error')}")
        return reply.get("result") or {}


def v1():
    return not os.path.exists(os.path.join(CGROUP, "cgroup.controllers"))


def shares_file(rel, milli):
    """(path, value) of a cgroup's CPU weight for a request of `milli` (kubelet/runc formulas)."""
    shares = max(2, milli * 1024 // 1000)
    rel = rel.strip("/")
    if v1():
        return os.path.join(CGROUP, "cpu", rel, "cpu.shares"), str(shares)
    return os.path.join(CGROUP, rel, "cpu.weight"), str(1 + (shares - 2) * 9999 // 262142)


def usage_ns(rel):
    rel = rel.strip("/")
    try:
        if v1():
            with open(os.path.join(CGROUP, "cpuacct", rel, "cpuacct.usage")) as f:
                return int(f.read().strip())
        with open(os.path.join(CGROUP, rel, "cpu.stat")) as f:
            for line in f:
                k, _, v = line.partition(" ")
                if k == "usage_usec":
                    return int(v) * 1000
    except (OSError, ValueError):
        return None
    return None


def start(run, tag, secs, names):
    with open(os.path.join(run, "scenario.json")) as f:
        spec = {c["name"]: c for c in json.load(f)["containers"]}
    peer = Peer(os.path.join(run, "peer.ctl"))
    for name in names:
        c = spec[name]
        with open(os.path.join(run, f"job.{name}"), "w") as f:
            f.write(f"{tag} {secs}\n")
        pod = peer.op(op="run_pod", pod=c["pod"])
        path, value = shares_file(pod.get("cgroup_rel", ""),
                                  c.get("resources", {}).get("cpu_request_milli", 0))
        try:
            with open(path, "w") as f:
                f.write(value)
        except OSError as e:
            print(f"pods.py: {path}: {e}", file=sys.stderr)
        ts = time.time_ns()
        peer.op(op="create", container=name)
        peer.op(op="start", container=name)
        if os.environ.get("CB_BE_CPUS"):
            # Right after StartContainer: the peer applies an update to running containers only.
            peer.op(op="update", container=name, resources={"cpus": os.environ["CB_BE_CPUS"]})
        with open(os.path.join(run, "triggers.txt"), "a") as f:
            f.write(f"{tag} {name} {ts}\n")


def stop(run, names):
    peer = Peer(os.path.join(run, "peer.ctl"))
    for name in names:
        peer.op(op="stop_pod", pod=name)
        peer.op(op="remove_pod", pod=name)


def usage(run, label):
    peer = Peer(os.path.join(run, "peer.ctl"))
    ctrs = peer.op(op="list").get("containers", [])
    ts = time.time_ns()
    parts = []
    for c in ctrs:
        u = usage_ns(c.get("cgroup_rel", ""))
        if u is not None:
            parts.append(f"{c['name']}={u}")
    with open(os.path.join(run, "usage.txt"), "a") as f:
        f.write(f"{label} {ts} {os.cpu_count()} {' '.join(parts)}\n")


def main(argv):
    if len(argv) >= 5 and argv[0] == "start":
        start(argv[1], argv[2], int(argv[3]), argv[4:])
    elif len(argv) >= 3 and argv[0] == "stop":
        stop(argv[1], argv[2:])
    elif len(argv) == 3 and argv[0] == "usage":
        usage(argv[1], argv[2])
    else:
        print(__doc__, file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, ValueError, RuntimeError, KeyError) as e:
        print(f"pods.py: {e}", file=sys.stderr)
        sys.exit(1)
