// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"errors"
	"fmt"
	"time"

	api "colod/nriapi"
	"colod/testpeer/scenario"
)

// AddPod defines a pod (it is not run yet).
func (rt *Runtime) AddPod(p scenario.Pod) error {
	if err := scenario.ValidatePod(&p); err != nil {
		return err
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, ok := rt.podDefs[p.Name]; ok {
		return fmt.Errorf("pod %s already defined", p.Name)
	}
	rt.podDefs[p.Name] = p
	return nil
}

// AddContainer defines a container (it is not created yet).
func (rt *Runtime) AddContainer(c scenario.Container) error {
	if err := scenario.ValidateContainer(&c); err != nil {
		return err
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, ok := rt.ctrDefs[c.Name]; ok {
		return fmt.Errorf("container %s already defined", c.Name)
	}
	if _, ok := rt.podDefs[c.Pod]; !ok {
		return fmt.Errorf("container %s: unknown pod %s", c.Name, c.Pod)
	}
	if !c.Fake && rt.cg == nil {
		return fmt.Errorf("container %s: no cgroup manager (only fake containers)", c.Name)
	}
	rt.ctrDefs[c.Name] = c
	return nil
}

// Do runs one step (timeline or control command) and returns its result.
func (rt *Runtime) Do(s scenario.Step) (interface{}, error) {
	if err := scenario.ValidateStep(&s); err != nil {
		return nil, err
	}
	switch s.Op {
	case "add_pod":
		return nil, rt.AddPod(*s.PodSpec)
	case "add_container":
		return nil, rt.AddContainer(*s.CtrSpec)
	case "sleep":
		time.Sleep(time.Duration(s.Ms) * time.Millisecond)
		return nil, nil
	case "restart_runtime":
		d := time.Duration(s.DelayMs) * time.Millisecond
		if d == 0 {
			d = 200 * time.Millisecond
		}
		return nil, rt.Restart(d)
	case "wait_plugins":
		return rt.waitPlugins(s.Count, time.Duration(s.TimeoutMs)*time.Millisecond)
	case "plugins":
		return rt.Plugins(), nil
	case "list":
		return rt.List(), nil
	case "exit":
		return nil, nil
	// Faults are armed without the NRI lock: they must not wait behind a relay in progress.
	case "refuse_updates":
		rt.RefuseUpdates(s.Count, s.Message)
		return nil, nil
	case "lose_replies":
		rt.LoseReplies(s.Count, time.Duration(s.Ms)*time.Millisecond)
		return nil, nil
	case "outage":
		return nil, rt.Outage(time.Duration(s.Ms) * time.Millisecond)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch s.Op {
	case "run_pod":
		return rt.runPod(s.Pod)
	case "stop_pod":
		return rt.stopPod(s.Pod)
	case "remove_pod":
		return rt.removePod(s.Pod)
	case "create":
		return rt.createContainer(s.Container)
	case "start":
		return rt.startContainer(s.Container)
	case "create_start":
		if _, err := rt.createContainer(s.Container); err != nil {
			return nil, err
		}
		return rt.startContainer(s.Container)
	case "stop":
		return rt.stopContainer(s.Container)
	case "remove":
		return rt.removeContainer(s.Container)
	case "update":
		return rt.updateContainer(s.Container, s.Resources)
	case "state":
		return rt.containerState(s.Container)
	}
	return nil, fmt.Errorf("op %s not handled", s.Op)
}

func (rt *Runtime) waitPlugins(count int, timeout time.Duration) (interface{}, error) {
	if count <= 0 {
		count = 1
	}
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		pl := rt.Plugins()
		if len(pl) >= count {
			return pl, nil
		}
		if time.Now().After(deadline) {
			return pl, fmt.Errorf("%d plugin(s) synchronized after %v, want %d", len(pl), timeout, count)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// List describes all pods and containers.
func (rt *Runtime) List() map[string]interface{} {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	pods := []interface{}{}
	for _, p := range rt.pods {
		pods = append(pods, p.describe())
	}
	ctrs := []interface{}{}
	for _, c := range rt.ctrs {
		ctrs = append(ctrs, c.describe())
	}
	return map[string]interface{}{"pods": pods, "containers": ctrs}
}

func (rt *Runtime) ctrDefsOf(podName string) []scenario.Container {
	var out []scenario.Container
	for _, c := range rt.ctrDefs {
		if c.Pod == podName {
			out = append(out, c)
		}
	}
	return out
}

func (rt *Runtime) runPod(name string) (interface{}, error) {
	def, ok := rt.podDefs[name]
	if !ok {
		return nil, fmt.Errorf("unknown pod %s", name)
	}
	if _, ok := rt.pods[name]; ok {
		return nil, fmt.Errorf("pod %s already running", name)
	}
	p := &pod{spec: def, id: newID(), uid: def.UID, qos: def.QoS}
	if p.uid == "" {
		p.uid = newUID()
	}
	if p.spec.Namespace == "" {
		p.spec.Namespace = "default"
	}
	if p.qos == "" {
		p.qos = qosOf(rt.ctrDefsOf(name))
	}
	p.rel, p.cgroupParent = podPaths(rt.cfg.CgroupParent, rt.cfg.CgroupDriver, p.qos, p.uid)
	needCgroup := false
	for _, c := range rt.ctrDefsOf(name) {
		needCgroup = needCgroup || !c.Fake
	}
	if needCgroup && rt.cg != nil {
		if err := rt.cg.Create(p.rel); err != nil {
			return nil, fmt.Errorf("pod %s cgroup: %w", name, err)
		}
		p.hasCgroup = true
	}
	rt.order++
	p.order = rt.order
	p.running = true
	rt.pods[name] = p
	err := rt.relayState(api.Event_RUN_POD_SANDBOX, p, nil)
	rt.log.Log("pod-running", Fields{"pod": name, "id": p.id, "uid": p.uid, "cgroup_parent": p.cgroupParent})
	return p.describe(), err
}

func (rt *Runtime) stopPod(name string) (interface{}, error) {
	p, ok := rt.pods[name]
	if !ok {
		return nil, fmt.Errorf("pod %s not running", name)
	}
	for _, c := range rt.ctrs {
		if c.pod == p && c.state == api.ContainerState_CONTAINER_RUNNING {
			if _, err := rt.stopContainer(c.spec.Name); err != nil {
				return nil, err
			}
		}
	}
	err := rt.relayState(api.Event_STOP_POD_SANDBOX, p, nil)
	return p.describe(), err
}

func (rt *Runtime) removePod(name string) (interface{}, error) {
	p, ok := rt.pods[name]
	if !ok {
		return nil, fmt.Errorf("pod %s not running", name)
	}
	for _, c := range rt.ctrs {
		if c.pod == p {
			if _, err := rt.removeContainer(c.spec.Name); err != nil {
				return nil, err
			}
		}
	}
	err := rt.relayState(api.Event_REMOVE_POD_SANDBOX, p, nil)
	p.running = false
	delete(rt.pods, name)
	if p.hasCgroup {
		if cerr := rt.cg.Remove(p.rel); cerr != nil && err == nil {
			err = cerr
		}
	}
	rt.log.Log("pod-removed", Fields{"pod": name, "id": p.id})
	return nil, err
}

func (rt *Runtime) createContainer(name string) (interface{}, error) {
	def, ok := rt.ctrDefs[name]
	if !ok {
		return nil, fmt.Errorf("unknown container %s", name)
	}
	if _, ok := rt.ctrs[name]; ok {
		return nil, fmt.Errorf("container %s already exists", name)
	}
	p, ok := rt.pods[def.Pod]
	if !ok {
		return nil, fmt.Errorf("container %s: pod %s not running", name, def.Pod)
	}
	c := &container{spec: def, id: newID(), pod: p, state: api.ContainerState_CONTAINER_CREATED,
		res: kubeletResources(def.Resources, p.qos)}
	rel, path := ctrPaths(p, rt.cfg.CgroupDriver, c.id)
	c.cgroupsPath = path
	initial := cloneResources(c.res)

	// CreateContainer: each plugin sees the request as adjusted by the earlier ones; a field set
	// by two plugins fails the creation (brief §3.5, §4.4).
	pristine := c.proto()
	own := newOwners(rt.cfg.Version)
	merged := &api.LinuxResources{}
	var others []*api.ContainerUpdate
	var consulted []*plugin
	adjusted := false
	for _, pl := range rt.livePlugins() {
		if !pl.subscribed(api.Event_CREATE_CONTAINER) {
			continue
		}
		consulted = append(consulted, pl)
		req := &api.CreateContainerRequest{Pod: p.proto(rt.cfg.CgroupDriver), Container: c.proto()}
		resp := &api.CreateContainerResponse{}
		ctx, cancel := pl.requestCtx()
		err := pl.call(ctx, "CreateContainer", req, resp)
		cancel()
		if err != nil {
			if fatal(err) {
				continue // plugin closed; the operation proceeds as if it returned nothing
			}
			return nil, rt.createFailed(name, fmt.Errorf("NRI CreateContainer failed: plugin %s: %w", pl.label(), err))
		}
		for _, u := range resp.Update {
			if u.ContainerId == c.id {
				return nil, rt.createFailed(name, fmt.Errorf("plugin %s asked update of %s during creation", pl.label(), c.id))
			}
		}
		if err := own.claimAdjust(c.id, resp.Adjust, pl.label()); err != nil {
			rt.logConflict(err, "CreateContainer", false, name)
			return nil, rt.createFailed(name, fmt.Errorf("NRI CreateContainer failed: %w", err))
		}
		ups, err := rt.claimUpdates(own, resp.Update, pl.label(), "CreateContainer")
		if err != nil {
			return nil, rt.createFailed(name, fmt.Errorf("NRI CreateContainer failed: %w", err))
		}
		others = append(others, ups...)
		if a := resp.Adjust; a != nil && a.Linux != nil && a.Linux.Resources != nil {
			mergeResources(c.res, a.Linux.Resources)
			mergeResources(merged, a.Linux.Resources)
			adjusted = true
		}
	}
	if rt.cfg.Version.Validation() {
		if err := rt.validate(p, pristine, merged, others, own, consulted); err != nil {
			return nil, rt.createFailed(name, err)
		}
	}
	if len(consulted) > 1 || len(own.simple[c.id])+len(own.compound[c.id]) > 0 {
		rt.log.Log("container-owners", Fields{"container": name, "id": c.id,
			"owners": own.describe(c.id), "reported": rt.cfg.Version.Validation()})
	}

	if !def.Fake {
		c.rel = rel
		if err := rt.cg.Create(rel); err != nil {
			_ = rt.cg.Remove(rel)
			return nil, fmt.Errorf("container %s cgroup: %w", name, err)
		}
		err := rt.cg.Apply(name, "create", rel, toCgroup(initial))
		if err == nil && adjusted {
			err = rt.cg.Apply(name, "adjust", rel, toCgroup(c.res))
		}
		if err == nil {
			err = rt.startProcess(c)
		}
		if err != nil {
			_ = rt.cg.Remove(rel)
			return nil, fmt.Errorf("creating container %s: %w", name, err)
		}
	}
	rt.order++
	c.order = rt.order
	rt.ctrs[name] = c
	rt.ctrByID[c.id] = c
	rt.applyUpdates(others, "update", "create")
	rt.log.Log("container-created", Fields{"container": name, "id": c.id, "pid": c.pid,
		"cgroups_path": c.cgroupsPath})
	err := rt.relayState(api.Event_POST_CREATE_CONTAINER, p, c)
	return c.describe(), err
}

func (rt *Runtime) startContainer(name string) (interface{}, error) {
	c, ok := rt.ctrs[name]
	if !ok {
		return nil, fmt.Errorf("container %s not created", name)
	}
	if c.state != api.ContainerState_CONTAINER_CREATED {
		return nil, fmt.Errorf("container %s is %s, not created", name, c.state)
	}
	if err := rt.relayState(api.Event_START_CONTAINER, c.pod, c); err != nil {
		return nil, fmt.Errorf("NRI StartContainer failed: %w", err)
	}
	if c.startW != nil {
		if _, err := c.startW.Write([]byte("\n")); err != nil {
			return nil, fmt.Errorf("releasing container %s: %w", name, err)
		}
		c.startW.Close()
		c.startW = nil
	}
	c.state = api.ContainerState_CONTAINER_RUNNING
	rt.log.Log("container-started", Fields{"container": name, "id": c.id, "pid": c.pid})
	err := rt.relayState(api.Event_POST_START_CONTAINER, c.pod, c)
	return c.describe(), err
}

func (rt *Runtime) stopContainer(name string) (interface{}, error) {
	c, ok := rt.ctrs[name]
	if !ok {
		return nil, fmt.Errorf("container %s not created", name)
	}
	if c.state == api.ContainerState_CONTAINER_STOPPED {
		return c.describe(), nil
	}
	rt.killContainer(c)
	c.state = api.ContainerState_CONTAINER_STOPPED
	rt.log.Log("container-stopped", Fields{"container": name, "id": c.id, "pid": c.pid})
	var first error
	for _, pl := range rt.livePlugins() {
		if !pl.subscribed(api.Event_STOP_CONTAINER) {
			continue
		}
		resp := &api.StopContainerResponse{}
		ctx, cancel := pl.requestCtx()
		err := pl.call(ctx, "StopContainer", &api.StopContainerRequest{Pod: c.pod.proto(rt.cfg.CgroupDriver),
			Container: c.proto()}, resp)
		cancel()
		if err != nil {
			if !fatal(err) && first == nil {
				first = err
			}
			continue
		}
		rt.applyUpdates(resp.Update, "update", pl.label())
	}
	return c.describe(), first
}

func (rt *Runtime) removeContainer(name string) (interface{}, error) {
	c, ok := rt.ctrs[name]
	if !ok {
		return nil, fmt.Errorf("container %s not created", name)
	}
	if c.state != api.ContainerState_CONTAINER_STOPPED {
		if _, err := rt.stopContainer(name); err != nil {
			rt.log.Log("stop-before-remove-failed", Fields{"container": name, "error": err})
		}
	}
	err := rt.relayState(api.Event_REMOVE_CONTAINER, c.pod, c)
	delete(rt.ctrs, name)
	delete(rt.ctrByID, c.id)
	if c.rel != "" {
		if cerr := rt.cg.Remove(c.rel); cerr != nil && err == nil {
			err = cerr
		}
	}
	rt.log.Log("container-removed", Fields{"container": name, "id": c.id})
	return nil, err
}

// updateContainer is a kubelet UpdateContainerResources.
func (rt *Runtime) updateContainer(name string, r *scenario.Resources) (interface{}, error) {
	c, ok := rt.ctrs[name]
	if !ok {
		return nil, fmt.Errorf("container %s not created", name)
	}
	if r == nil {
		return nil, errors.New("update needs \"resources\"")
	}
	// Only the fields the step sets (kubelet sends the full set; absent = keep).
	req := &api.LinuxResources{Cpu: &api.LinuxCPU{}, Memory: &api.LinuxMemory{}}
	if r.CPURequestMilli > 0 {
		s := uint64(r.CPURequestMilli) * 1024 / 1000
		if s < 2 {
			s = 2
		}
		req.Cpu.Shares = &api.OptionalUInt64{Value: s}
	}
	if r.CPULimitMilli > 0 {
		req.Cpu.Quota = &api.OptionalInt64{Value: r.CPULimitMilli * 100}
		req.Cpu.Period = &api.OptionalUInt64{Value: 100000}
	}
	if r.MemoryLimitBytes > 0 {
		req.Memory.Limit = &api.OptionalInt64{Value: r.MemoryLimitBytes}
	}
	req.Cpu.Cpus, req.Cpu.Mems = r.Cpus, r.Mems
	if len(r.Unified) > 0 {
		req.Unified = copyMap(r.Unified)
	}
	var others []*api.ContainerUpdate
	own := newOwners(rt.cfg.Version)
	for _, pl := range rt.livePlugins() {
		if !pl.subscribed(api.Event_UPDATE_CONTAINER) {
			continue
		}
		resp := &api.UpdateContainerResponse{}
		ctx, cancel := pl.requestCtx()
		err := pl.call(ctx, "UpdateContainer", &api.UpdateContainerRequest{
			Pod: c.pod.proto(rt.cfg.CgroupDriver), Container: c.proto(), LinuxResources: req}, resp)
		cancel()
		if err != nil {
			if fatal(err) {
				continue
			}
			return nil, fmt.Errorf("NRI UpdateContainer failed: plugin %s: %w", pl.label(), err)
		}
		ups, err := rt.claimUpdates(own, resp.Update, pl.label(), "UpdateContainer")
		if err != nil {
			return nil, fmt.Errorf("NRI UpdateContainer failed: %w", err)
		}
		for _, u := range ups {
			if u.ContainerId == c.id {
				if u.Linux != nil {
					mergeResources(req, u.Linux.Resources)
				}
			} else {
				others = append(others, u)
			}
		}
	}
	if c.state == api.ContainerState_CONTAINER_RUNNING && c.rel != "" {
		if err := rt.cg.Apply(name, "kubelet", c.rel, toCgroup(req)); err != nil {
			return nil, err
		}
	}
	mergeResources(c.res, req)
	rt.applyUpdates(others, "update", "update-container")
	err := rt.relayState(api.Event_POST_UPDATE_CONTAINER, c.pod, c)
	return c.describe(), err
}
