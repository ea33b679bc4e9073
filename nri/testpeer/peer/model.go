// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"

	api "colod/nriapi"
	"colod/testpeer/cgroup"
	"colod/testpeer/scenario"
)

type pod struct {
	spec         scenario.Pod
	id           string
	uid          string
	qos          string
	rel          string // cgroup dir relative to each hierarchy root
	cgroupParent string // as reported to plugins
	running      bool
	hasCgroup    bool
	order        int
}

type container struct {
	spec        scenario.Container
	id          string
	pod         *pod
	state       api.ContainerState
	pid         int
	rel         string // cgroup dir ("" for fake containers)
	cgroupsPath string // as reported
	res         *api.LinuxResources
	cmd         *exec.Cmd
	startW      *os.File
	exited      chan struct{}
	order       int
	synthetic   *api.Container // realistic object for fake synthetic containers
}

func newID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

func newUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// qosOf derives the kubelet QoS class from the containers' resources.
func qosOf(ctrs []scenario.Container) string {
	any, all := false, len(ctrs) > 0
	for _, c := range ctrs {
		r := c.Resources
		if r == nil || (r.CPURequestMilli == 0 && r.CPULimitMilli == 0 && r.MemoryLimitBytes == 0) {
			all = false
			continue
		}
		any = true
		if r.CPULimitMilli == 0 || r.MemoryLimitBytes == 0 || r.CPURequestMilli != r.CPULimitMilli {
			all = false
		}
	}
	switch {
	case all:
		return "guaranteed"
	case any:
		return "burstable"
	default:
		return "besteffort"
	}
}

// podPaths returns (relative dir, reported cgroup parent) for a pod, kubelet style.
func podPaths(prefix, driver, qos, uid string) (string, string) {
	if driver == "systemd" {
		u := strings.ReplaceAll(uid, "-", "_")
		if qos == "guaranteed" {
			slice := "kubepods-pod" + u + ".slice"
			return prefix + "/kubepods.slice/" + slice, slice
		}
		slice := "kubepods-" + qos + "-pod" + u + ".slice"
		return prefix + "/kubepods.slice/kubepods-" + qos + ".slice/" + slice, slice
	}
	rel := prefix + "/kubepods"
	if qos != "guaranteed" {
		rel += "/" + qos
	}
	rel += "/pod" + uid
	return rel, "/" + rel
}

// ctrPaths returns (relative dir, reported cgroups_path) for a container (or sandbox) id.
func ctrPaths(p *pod, driver, id string) (string, string) {
	if driver == "systemd" {
		return p.rel + "/cri-containerd-" + id + ".scope", p.cgroupParent + ":cri-containerd:" + id
	}
	return p.rel + "/" + id, p.cgroupParent + "/" + id
}

// kubeletResources converts scenario resources to what containerd puts in the OCI spec.
func kubeletResources(r *scenario.Resources, qos string) *api.LinuxResources {
	out := &api.LinuxResources{Cpu: &api.LinuxCPU{}, Memory: &api.LinuxMemory{}}
	shares := uint64(2)
	if r != nil && r.CPURequestMilli > 0 && qos != "besteffort" {
		shares = uint64(r.CPURequestMilli) * 1024 / 1000
		if shares < 2 {
			shares = 2
		}
	}
	out.Cpu.Shares = &api.OptionalUInt64{Value: shares}
	out.Cpu.Period = &api.OptionalUInt64{Value: 100000}
	if r != nil && r.CPULimitMilli > 0 {
		out.Cpu.Quota = &api.OptionalInt64{Value: r.CPULimitMilli * 100}
	}
	if r != nil && r.MemoryLimitBytes > 0 {
		out.Memory.Limit = &api.OptionalInt64{Value: r.MemoryLimitBytes}
	}
	if r != nil {
		out.Cpu.Cpus = r.Cpus
		out.Cpu.Mems = r.Mems
		if len(r.Unified) > 0 {
			out.Unified = map[string]string{}
			for k, v := range r.Unified {
				out.Unified[k] = v
			}
		}
	}
	return out
}

// toCgroup converts NRI resources to what the cgroup writer applies.
func toCgroup(r *api.LinuxResources) *cgroup.Resources {
	out := &cgroup.Resources{}
	if r == nil {
		return out
	}
	if c := r.Cpu; c != nil {
		if c.Shares != nil {
			v := c.Shares.Value
			out.Shares = &v
		}
		if c.Quota != nil {
			v := c.Quota.Value
			out.Quota = &v
		}
		if c.Period != nil {
			v := c.Period.Value
			out.Period = &v
		}
		out.Cpus, out.Mems = c.Cpus, c.Mems
	}
	if m := r.Memory; m != nil && m.Limit != nil {
		v := m.Limit.Value
		out.MemLimit = &v
	}
	if len(r.Unified) > 0 {
		out.Unified = r.Unified
	}
	return out
}

// mergeResources overlays the set fields of upd onto dst (NRI optional semantics).
func mergeResources(dst, upd *api.LinuxResources) {
	if upd == nil {
		return
	}
	if dst.Cpu == nil {
		dst.Cpu = &api.LinuxCPU{}
	}
	if dst.Memory == nil {
		dst.Memory = &api.LinuxMemory{}
	}
	if c := upd.Cpu; c != nil {
		if c.Shares != nil {
			dst.Cpu.Shares = &api.OptionalUInt64{Value: c.Shares.Value}
		}
		if c.Quota != nil {
			dst.Cpu.Quota = &api.OptionalInt64{Value: c.Quota.Value}
		}
		if c.Period != nil {
			dst.Cpu.Period = &api.OptionalUInt64{Value: c.Period.Value}
		}
		if c.Cpus != "" {
			dst.Cpu.Cpus = c.Cpus
		}
		if c.Mems != "" {
			dst.Cpu.Mems = c.Mems
		}
	}
	if m := upd.Memory; m != nil && m.Limit != nil {
		dst.Memory.Limit = &api.OptionalInt64{Value: m.Limit.Value}
	}
	for k, v := range upd.Unified {
		if dst.Unified == nil {
			dst.Unified = map[string]string{}
		}
		dst.Unified[k] = v
	}
}

func cloneResources(r *api.LinuxResources) *api.LinuxResources {
	out := &api.LinuxResources{}
	mergeResources(out, r)
	return out
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (p *pod) proto(driver string) *api.PodSandbox {
	labels := copyMap(p.spec.Labels)
	labels["io.kubernetes.pod.name"] = p.spec.Name
	labels["io.kubernetes.pod.namespace"] = p.spec.Namespace
	labels["io.kubernetes.pod.uid"] = p.uid
	_, sandboxPath := ctrPaths(p, driver, p.id)
	return &api.PodSandbox{
		Id: p.id, Name: p.spec.Name, Uid: p.uid, Namespace: p.spec.Namespace,
		Labels: labels, Annotations: copyMap(p.spec.Annotations),
		Linux: &api.LinuxPodSandbox{CgroupParent: p.cgroupParent, CgroupsPath: sandboxPath},
	}
}

func (c *container) proto() *api.Container {
	if c.synthetic != nil {
		out := *c.synthetic
		out.State = c.state
		out.Linux.Resources = cloneResources(c.res)
		return &out
	}
	labels := copyMap(c.spec.Labels)
	labels["io.kubernetes.container.name"] = c.spec.Name
	labels["io.kubernetes.pod.name"] = c.pod.spec.Name
	labels["io.kubernetes.pod.namespace"] = c.pod.spec.Namespace
	labels["io.kubernetes.pod.uid"] = c.pod.uid
	return &api.Container{
		Id: c.id, PodSandboxId: c.pod.id, Name: c.spec.Name, State: c.state,
		Labels: labels, Annotations: copyMap(c.spec.Annotations), Args: c.spec.Command,
		Linux: &api.LinuxContainer{Resources: cloneResources(c.res), CgroupsPath: c.cgroupsPath},
		Pid:   uint32(c.pid),
	}
}

// describe is the control socket's view of a container.
func (c *container) describe() map[string]interface{} {
	return map[string]interface{}{
		"name": c.spec.Name, "id": c.id, "pod": c.pod.spec.Name, "pod_id": c.pod.id,
		"state": c.state.String(), "pid": c.pid, "cgroup_rel": c.rel, "cgroups_path": c.cgroupsPath,
		"fake": c.spec.Fake, "resources": c.res,
	}
}

func (p *pod) describe() map[string]interface{} {
	return map[string]interface{}{
		"name": p.spec.Name, "id": p.id, "uid": p.uid, "namespace": p.spec.Namespace, "qos": p.qos,
		"cgroup_rel": p.rel, "cgroup_parent": p.cgroupParent, "running": p.running,
	}
}

func errf(format string, a ...interface{}) error { return fmt.Errorf(format, a...) }
