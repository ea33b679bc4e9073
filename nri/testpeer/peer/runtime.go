// SPDX-License-Identifier: Apache-2.0

// Package peer is the runtime side of NRI: it accepts plugins on a socket and behaves like
// containerd's NRI adaptation (registration, Configure, chunked Synchronize, event relay,
// UpdateContainers), with containers that are real cgroups and processes.
package peer

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "colod/nriapi"
	"colod/testpeer/cgroup"
	"colod/testpeer/scenario"
)

// Config of a Runtime.
type Config struct {
	SocketPath          string
	Version             Version
	RuntimeName         string
	RuntimeVersion      string
	RegistrationTimeout time.Duration
	RequestTimeout      time.Duration
	SyncMaxObjects      int
	CgroupParent        string // prefix dir under every hierarchy
	CgroupDriver        string // cgroupfs | systemd
	StopTimeout         time.Duration
	// Pre-installed plugins (brief §1.4): executables NN-name in PluginDir are started by the
	// runtime on an inherited socketpair; PluginConfigDir holds their NN-name.conf / name.conf.
	PluginDir       string
	PluginConfigDir string
	// Where launched plugins' stderr goes (nil: /dev/null, as upstream).
	PluginStderr *os.File
}

// Runtime is the emulated container runtime with its NRI adaptation.
type Runtime struct {
	cfg Config
	log *EventLog
	cg  *cgroup.Manager // nil: no cgroups (only fake containers allowed)

	// mu is the NRI lock: held while relaying an event, synchronizing a plugin and serving
	// UpdateContainers, and while changing pods/containers.
	mu         sync.Mutex
	podDefs    map[string]scenario.Pod
	ctrDefs    map[string]scenario.Container
	pods       map[string]*pod       // by name
	ctrs       map[string]*container // by name
	ctrByID    map[string]*container
	order      int
	plugins    []*plugin // synchronized, sorted by index
	connecting map[*plugin]bool

	lmu      sync.Mutex
	listener net.Listener
	seq      int
	down     bool
	stopped  bool
	restarts int
	live     map[*plugin]bool // every connection past accept, whatever its stage (under lmu)
	wg       sync.WaitGroup

	// downMu is held for the whole of a restart or outage, so they never overlap: two of them
	// would race for the socket path and leave a listener nobody closes.
	downMu sync.Mutex

	faults faults

	launched []*launchedPlugin // pre-installed plugins of the current incarnation (under lmu)
}

// New makes a runtime; cg may be nil when only fake containers are used.
func New(cfg Config, log *EventLog, cg *cgroup.Manager) *Runtime {
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 2 * time.Second
	}
	return &Runtime{cfg: cfg, log: log, cg: cg, podDefs: map[string]scenario.Pod{},
		ctrDefs: map[string]scenario.Container{}, pods: map[string]*pod{},
		ctrs: map[string]*container{}, ctrByID: map[string]*container{},
		connecting: map[*plugin]bool{}, live: map[*plugin]bool{}}
}

// Listen opens the socket (removing a stale file, parent dir 0700) and starts accepting.
func (rt *Runtime) Listen() error {
	rt.lmu.Lock()
	defer rt.lmu.Unlock()
	if rt.stopped {
		return errors.New("runtime stopped")
	}
	if err := os.MkdirAll(filepath.Dir(rt.cfg.SocketPath), 0o700); err != nil {
		return fmt.Errorf("creating socket dir: %w", err)
	}
	if err := os.Remove(rt.cfg.SocketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale socket: %w", err)
	}
	l, err := net.Listen("unix", rt.cfg.SocketPath)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", rt.cfg.SocketPath, err)
	}
	rt.listener = l
	rt.down = false
	rt.log.Log("listening", Fields{"socket": rt.cfg.SocketPath, "nri_version": string(rt.cfg.Version)})
	rt.wg.Add(1)
	go rt.acceptLoop(l)
	return rt.launchPlugins()
}

func (rt *Runtime) acceptLoop(l net.Listener) {
	defer rt.wg.Done()
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		rt.lmu.Lock()
		rt.seq++
		seq := rt.seq
		rt.lmu.Unlock()
		go rt.servePlugin(conn, seq, nil)
	}
}

func (rt *Runtime) addConnecting(p *plugin) bool {
	// Checked and registered in one lmu section: goDown either sees this plugin in live or
	// the plugin sees down, so no connection outlives a restart.
	rt.lmu.Lock()
	down := rt.down || rt.stopped
	if !down {
		rt.live[p] = true
	}
	rt.lmu.Unlock()
	if down {
		return false
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.connecting[p] = true
	return true
}

// activate adds a synchronized plugin to the event list (must hold mu).
func (rt *Runtime) activate(p *plugin) {
	delete(rt.connecting, p)
	rt.plugins = append(rt.plugins, p)
	sort.SliceStable(rt.plugins, func(i, j int) bool { return rt.plugins[i].idx < rt.plugins[j].idx })
}

// livePlugins is a copy of the synchronized plugins whose connection is still open (must hold
// mu). A closed plugin stays in rt.plugins until its serve goroutine gets the NRI lock to remove
// it; skipping it here keeps a relay during a restart or outage from calling a dead connection.
func (rt *Runtime) livePlugins() []*plugin {
	out := make([]*plugin, 0, len(rt.plugins))
	for _, p := range rt.plugins {
		select {
		case <-p.mux.Done():
		default:
			out = append(out, p)
		}
	}
	return out
}

func (rt *Runtime) removePlugin(p *plugin) {
	rt.lmu.Lock()
	delete(rt.live, p)
	rt.lmu.Unlock()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	delete(rt.connecting, p)
	for i, q := range rt.plugins {
		if q == p {
			rt.plugins = append(rt.plugins[:i], rt.plugins[i+1:]...)
			break
		}
	}
}

// closeAllPlugins closes every plugin connection (restart/shutdown). It takes only lmu, not
// the NRI lock, so it does not wait for an event relay in progress (the relay fails instead).
func (rt *Runtime) closeAllPlugins(reason string) {
	rt.lmu.Lock()
	all := make([]*plugin, 0, len(rt.live))
	for p := range rt.live {
		all = append(all, p)
	}
	rt.lmu.Unlock()
	for _, p := range all {
		p.close(reason)
	}
}

// Restart emulates a runtime restart: plugins and listener closed, socket removed, back after
// delay with the same pods and containers. It blocks for the delay (and waits for an outage in
// progress to end first); Outage is the non-blocking form.
func (rt *Runtime) Restart(delay time.Duration) error {
	rt.downMu.Lock()
	defer rt.downMu.Unlock()
	if err := rt.goDown(delay, false); err != nil {
		return err
	}
	time.Sleep(delay)
	return rt.Listen()
}

// goDown is the first half of a restart (must hold downMu): listener closed, socket removed,
// every plugin connection closed. Pods and containers stay.
func (rt *Runtime) goDown(delay time.Duration, outage bool) error {
	rt.lmu.Lock()
	if rt.stopped {
		rt.lmu.Unlock()
		return errors.New("runtime stopped")
	}
	rt.down = true
	rt.restarts++
	n := rt.restarts
	if rt.listener != nil {
		_ = rt.listener.Close()
		rt.listener = nil
	}
	_ = os.Remove(rt.cfg.SocketPath)
	rt.lmu.Unlock()
	f := Fields{"restart": n, "delay_ms": delay.Milliseconds()}
	if outage {
		f["outage"] = true
	}
	rt.log.Log("runtime-restart", f)
	rt.closeAllPlugins("runtime restarting")
	rt.killLaunched()
	return nil
}

// Shutdown closes everything and removes what the runtime created.
func (rt *Runtime) Shutdown() error {
	rt.lmu.Lock()
	rt.stopped = true
	if rt.listener != nil {
		_ = rt.listener.Close()
		rt.listener = nil
	}
	rt.lmu.Unlock()
	rt.closeAllPlugins("runtime shutting down")
	rt.killLaunched()
	_ = os.Remove(rt.cfg.SocketPath)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, c := range rt.ctrs {
		rt.killContainer(c)
	}
	var err error
	if rt.cg != nil {
		err = rt.cg.Cleanup()
	}
	rt.log.Log("shutdown", Fields{"cleanup_error": errString(err)})
	return err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Plugins returns the synchronized plugins' labels.
func (rt *Runtime) Plugins() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := []string{}
	for _, p := range rt.plugins {
		out = append(out, p.label())
	}
	return out
}

// snapshot returns every pod and container as NRI objects (must hold mu).
func (rt *Runtime) snapshot() ([]*api.PodSandbox, []*api.Container) {
	pods := make([]*pod, 0, len(rt.pods))
	for _, p := range rt.pods {
		if p.running {
			pods = append(pods, p)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].order < pods[j].order })
	ctrs := make([]*container, 0, len(rt.ctrs))
	for _, c := range rt.ctrs {
		if c.id != "" {
			ctrs = append(ctrs, c)
		}
	}
	sort.Slice(ctrs, func(i, j int) bool { return ctrs[i].order < ctrs[j].order })
	outP := make([]*api.PodSandbox, 0, len(pods))
	for _, p := range pods {
		outP = append(outP, p.proto(rt.cfg.CgroupDriver))
	}
	outC := make([]*api.Container, 0, len(ctrs))
	for _, c := range ctrs {
		outC = append(outC, c.proto())
	}
	return outP, outC
}

// applyUpdates applies plugin updates (must hold mu). Returns the failed ones (not counting
// ignore_failure). Unknown ids are ignored, as containerd does.
func (rt *Runtime) applyUpdates(ups []*api.ContainerUpdate, source, from string) []*api.ContainerUpdate {
	var failed []*api.ContainerUpdate
	for _, u := range ups {
		if err := rt.applyUpdate(u, source); err != nil {
			rt.log.Log("update-failed", Fields{"plugin": from, "container_id": u.ContainerId,
				"ignore_failure": u.IgnoreFailure, "error": err})
			if !u.IgnoreFailure {
				failed = append(failed, u)
			}
			continue
		}
		// One line per container per applied update: tools count writers per container (a
		// field flipping between two plugins shows up as alternating plugins here).
		if c, ok := rt.ctrByID[u.ContainerId]; ok && u.Linux != nil && u.Linux.Resources != nil {
			o := newOwners(rt.cfg.Version)
			_ = o.claimResources(u.ContainerId, u.Linux.Resources, from)
			fields := []string{}
			for f := range o.describe(u.ContainerId) {
				fields = append(fields, f)
			}
			sort.Strings(fields)
			rt.log.Log("container-updated", Fields{"container": c.spec.Name, "id": c.id,
				"plugin": from, "source": source, "fields": fields})
		}
	}
	return failed
}

func (rt *Runtime) applyUpdate(u *api.ContainerUpdate, source string) error {
	c, ok := rt.ctrByID[u.ContainerId]
	if !ok {
		rt.log.Log("update-unknown-container", Fields{"container_id": u.ContainerId})
		return nil
	}
	if u.Linux == nil || u.Linux.Resources == nil {
		return nil
	}
	// containerd: a running container gets `runc update`; otherwise only the spec changes.
	if c.state == api.ContainerState_CONTAINER_RUNNING && c.rel != "" {
		if err := rt.cg.Apply(c.spec.Name, source, c.rel, toCgroup(u.Linux.Resources)); err != nil {
			return err
		}
	}
	mergeResources(c.res, u.Linux.Resources)
	return nil
}

// updateFromPlugin serves UpdateContainers (plugin → runtime) under the NRI lock. Injected
// faults are taken here, under the same lock, so they hit calls in the order they are served.
func (rt *Runtime) updateFromPlugin(p *plugin, req *api.UpdateContainersRequest) (*api.UpdateContainersResponse, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if err := rt.refuseUpdate(p, req); err != nil {
		return nil, err
	}
	rt.log.Log("update-request", Fields{"plugin": p.label(), "count": len(req.Update),
		"evict": len(req.Evict)})
	failed := rt.applyUpdates(req.Update, "update", p.label())
	rt.log.Log("update-result", Fields{"plugin": p.label(), "failed": len(failed)})
	rt.loseReply(p)
	if len(failed) > 0 {
		return nil, status.Error(codes.Unknown, updateFailedMsg)
	}
	return &api.UpdateContainersResponse{}, nil
}

// relayState sends a pod event / post-event to every subscribed plugin (must hold mu).
// Errors that are not fatal are returned (the first one) after all plugins saw the event.
func (rt *Runtime) relayState(e api.Event, p *pod, c *container) error {
	pd := p.proto(rt.cfg.CgroupDriver)
	var ct *api.Container
	if c != nil {
		ct = c.proto()
	}
	var first error
	for _, pl := range rt.livePlugins() {
		if err := pl.stateEvent(e, pd, ct); err != nil && !fatal(err) && first == nil {
			first = fmt.Errorf("plugin %s: %s: %w", pl.label(), e, err)
		}
	}
	return first
}

// startProcess runs the command inside the cgroup, held before exec (runc create).
func (rt *Runtime) startProcess(c *container) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	args := append([]string{"-c", `read _ <&3; exec 3<&-; exec "$@"`, "colod-testpeer-init"}, c.spec.Command...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("starting %v: %w", c.spec.Command, err)
	}
	r.Close()
	c.cmd, c.startW, c.pid, c.exited = cmd, w, cmd.Process.Pid, make(chan struct{})
	exited := c.exited
	name := c.spec.Name
	go func() {
		err := cmd.Wait()
		close(exited)
		rt.log.Log("container-exited", Fields{"container": name, "pid": cmd.Process.Pid, "status": errString(err)})
	}()
	if err := rt.cg.AddProc(c.rel, c.pid); err != nil {
		rt.killContainer(c)
		return err
	}
	return nil
}

// killContainer stops the process group, waiting for the exit.
func (rt *Runtime) killContainer(c *container) {
	if c.cmd == nil {
		return
	}
	if c.startW != nil {
		c.startW.Close()
		c.startW = nil
	}
	select {
	case <-c.exited:
	default:
		_ = syscall.Kill(-c.pid, syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(rt.cfg.StopTimeout):
			_ = syscall.Kill(-c.pid, syscall.SIGKILL)
			<-c.exited
		}
	}
	c.cmd = nil
}
