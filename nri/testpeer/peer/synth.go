// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"fmt"
	"time"

	api "colod/nriapi"
	"colod/testpeer/scenario"
)

// SynthOptions shapes the synthetic pods and containers (Synthesize).
type SynthOptions struct {
	Pods, Containers int
	// CgroupPrefix: when set, the i-th container (from 0) reports the cgroups path
	// CgroupPrefix+(i+1) (cgroupfs form, e.g. "/colod-scale-x/cg" names "/colod-scale-x/cg1"):
	// cgroups made and populated by someone else (scripts/bench/scale.sh), so colod resolves
	// and reads them as it would live containers. The peer never writes to them.
	CgroupPrefix string
	// BestEffortEvery: every k-th pod (k > 0) is BestEffort (colod's BE), the rest Burstable.
	BestEffortEvery int
}

// Synthesize adds nPods running pods with nCtrs running fake containers in all (spread evenly),
// shaped like shared/docs/realistic-nri-objects.md. They have no cgroups and no processes.
func (rt *Runtime) Synthesize(nPods, nCtrs int) error {
	return rt.SynthesizeWith(SynthOptions{Pods: nPods, Containers: nCtrs})
}

// SynthesizeWith is Synthesize with the options above.
func (rt *Runtime) SynthesizeWith(o SynthOptions) error {
	nPods, nCtrs := o.Pods, o.Containers
	if o.BestEffortEvery < 0 {
		return fmt.Errorf("--synth-besteffort-every must be >= 0")
	}
	if nPods <= 0 {
		if nCtrs > 0 {
			return fmt.Errorf("--synth-containers needs --synth-pods")
		}
		return nil
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	seen := time.Now().UTC().Format(time.RFC3339)
	pods := make([]*pod, nPods)
	for i := 0; i < nPods; i++ {
		ns := fmt.Sprintf("ns-%d", i%10)
		name := fmt.Sprintf("app-%03d-7d9f8c6b5d-x%04d", i, i)
		qos := "burstable"
		if o.BestEffortEvery > 0 && i%o.BestEffortEvery == o.BestEffortEvery-1 {
			qos = "besteffort"
		}
		def := scenario.Pod{Name: name, Namespace: ns, QoS: qos,
			Labels: map[string]string{"app": fmt.Sprintf("app-%03d", i), "pod-template-hash": "7d9f8c6b5d"}}
		p := &pod{spec: def, id: newID(), uid: newUID(), qos: qos, running: true}
		p.rel, p.cgroupParent = podPaths(rt.cfg.CgroupParent, rt.cfg.CgroupDriver, p.qos, p.uid)
		p.spec.Annotations = map[string]string{
			"kubernetes.io/config.seen": seen, "kubernetes.io/config.source": "api",
			"io.kubernetes.cri.container-type": "sandbox", "io.kubernetes.cri.sandbox-id": p.id,
			"io.kubernetes.cri.sandbox-name": name, "io.kubernetes.cri.sandbox-namespace": ns,
			"io.kubernetes.cri.sandbox-uid":           p.uid,
			"io.kubernetes.cri.sandbox-log-directory": "/var/log/pods/" + ns + "_" + name + "_" + p.uid,
		}
		rt.order++
		p.order = rt.order
		if _, dup := rt.podDefs[name]; dup {
			return fmt.Errorf("synthetic pod %s clashes with a defined pod", name)
		}
		rt.podDefs[name] = def
		rt.pods[name] = p
		pods[i] = p
	}
	for i := 0; i < nCtrs; i++ {
		p := pods[i%nPods]
		name := fmt.Sprintf("synth-%05d", i)
		// Unique in its pod (as Kubernetes requires): the i-th container of pod i % nPods.
		cname := fmt.Sprintf("container-%d", i/nPods)
		def := scenario.Container{Name: name, Pod: p.spec.Name, Fake: true}
		c := &container{spec: def, id: newID(), pod: p, state: api.ContainerState_CONTAINER_RUNNING,
			pid: 20000 + i}
		_, c.cgroupsPath = ctrPaths(p, rt.cfg.CgroupDriver, c.id)
		if o.CgroupPrefix != "" {
			c.cgroupsPath = fmt.Sprintf("%s%d", o.CgroupPrefix, i+1)
		}
		c.res = &api.LinuxResources{
			Cpu: &api.LinuxCPU{Shares: &api.OptionalUInt64{Value: 102}, Quota: &api.OptionalInt64{Value: 50000},
				Period: &api.OptionalUInt64{Value: 100000}},
			Memory: &api.LinuxMemory{Limit: &api.OptionalInt64{Value: 256 << 20},
				Swap: &api.OptionalInt64{Value: 256 << 20}},
			HugepageLimits: []*api.HugepageLimit{{PageSize: "2MB"}, {PageSize: "1GB"}},
			Unified:        map[string]string{"memory.oom.group": "1"},
		}
		ns := p.spec.Namespace
		c.synthetic = &api.Container{
			Id: c.id, PodSandboxId: p.id, Name: cname, Pid: uint32(c.pid),
			Labels: map[string]string{"io.kubernetes.container.name": cname,
				"io.kubernetes.pod.name": p.spec.Name, "io.kubernetes.pod.namespace": ns,
				"io.kubernetes.pod.uid": p.uid},
			Annotations: map[string]string{
				"io.kubernetes.container.hash": "a1b2c3d4", "io.kubernetes.container.restartCount": "0",
				"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
				"io.kubernetes.container.terminationMessagePolicy": "File",
				"io.kubernetes.pod.terminationGracePeriod":         "30",
				"io.kubernetes.cri.container-name":                 cname,
				"io.kubernetes.cri.container-type":                 "container",
				"io.kubernetes.cri.image-name":                     "registry.example.com/team/app:v1.2.3",
				"io.kubernetes.cri.sandbox-id":                     p.id,
				"io.kubernetes.cri.sandbox-name":                   p.spec.Name,
				"io.kubernetes.cri.sandbox-namespace":              ns,
				"io.kubernetes.cri.sandbox-uid":                    p.uid,
			},
			Args: []string{"/usr/local/bin/app", "--config=/etc/app/config.yaml", "--port=8080"},
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"HOSTNAME=" + p.spec.Name, "KUBERNETES_SERVICE_HOST=10.96.0.1",
				"KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT_HTTPS=443",
				"KUBERNETES_PORT=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443",
				"KUBERNETES_PORT_443_TCP_PROTO=tcp", "KUBERNETES_PORT_443_TCP_PORT=443",
				"KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1", "APP_MODE=production", "APP_LOG_LEVEL=info",
				"APP_WORKERS=4", "APP_REGION=eu-west-1"},
			Mounts: synthMounts(p),
			Linux: &api.LinuxContainer{
				Namespaces: []*api.LinuxNamespace{{Type: "pid"},
					{Type: "ipc", Path: fmt.Sprintf("/proc/%d/ns/ipc", 10000+i%nPods)},
					{Type: "uts", Path: fmt.Sprintf("/proc/%d/ns/uts", 10000+i%nPods)},
					{Type: "network", Path: fmt.Sprintf("/proc/%d/ns/net", 10000+i%nPods)},
					{Type: "mount"}},
				OomScoreAdj: &api.OptionalInt{Value: 999},
				CgroupsPath: c.cgroupsPath,
			},
		}
		rt.order++
		c.order = rt.order
		rt.ctrDefs[name] = def
		rt.ctrs[name] = c
		rt.ctrByID[c.id] = c
	}
	rt.log.Log("synthesized", Fields{"pods": nPods, "containers": nCtrs,
		"cgroup_prefix": o.CgroupPrefix, "besteffort_every": o.BestEffortEvery})
	return nil
}

func synthMounts(p *pod) []*api.Mount {
	base := "/var/lib/kubelet/pods/" + p.uid
	sb := "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/" + p.id
	return []*api.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		{Destination: "/etc/hosts", Type: "bind", Source: base + "/etc-hosts", Options: []string{"rbind", "rprivate", "rw"}},
		{Destination: "/dev/termination-log", Type: "bind", Source: base + "/containers/app/0a1b2c3d", Options: []string{"rbind", "rprivate", "rw"}},
		{Destination: "/etc/hostname", Type: "bind", Source: sb + "/hostname", Options: []string{"rbind", "rprivate", "rw"}},
		{Destination: "/etc/resolv.conf", Type: "bind", Source: sb + "/resolv.conf", Options: []string{"rbind", "rprivate", "rw"}},
		{Destination: "/dev/shm", Type: "bind", Source: "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/" + p.id + "/shm", Options: []string{"rbind", "rprivate", "rw"}},
		{Destination: "/var/run/secrets/kubernetes.io/serviceaccount", Type: "bind", Source: base + "/volumes/kubernetes.io~projected/kube-api-access-x7k2p", Options: []string{"rbind", "rprivate", "ro"}},
	}
}
