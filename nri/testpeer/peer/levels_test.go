// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/ttrpc"

	api "colod/nriapi"
	"colod/testpeer/mux"
	"colod/testpeer/scenario"
)

// levelPlugin is a Go plugin for the level tests: it records what the runtime sends and answers
// CreateContainer with a fixed adjustment.
type levelPlugin struct {
	mux    *mux.Mux
	client *ttrpc.Client
	server *ttrpc.Server
	label  string

	mu       sync.Mutex
	cfg      *api.ConfigureRequest
	syncMore []bool           // `more` of every Synchronize message
	rpcs     []string         // every Plugin-service method called, StateChange as StateChange:<event>
	seen     []*api.Container // CreateContainer requests' containers
	owners   *api.OwningPlugins
	adjust   *api.LinuxResources
	others   []*api.ContainerUpdate
	reject   string
}

type levelOpts struct {
	name, idx string
	events    int32
	adjust    *api.LinuxResources
	others    []*api.ContainerUpdate
	reject    string
}

func newLevelRuntime(t *testing.T, buf *syncBuf, v Version, cfg func(*Config)) *Runtime {
	t.Helper()
	c := Config{SocketPath: filepath.Join(t.TempDir(), "nri.sock"), Version: v,
		RuntimeName: "containerd", RuntimeVersion: v.DefaultRuntimeVersion(),
		RegistrationTimeout: time.Second, RequestTimeout: time.Second}
	if cfg != nil {
		cfg(&c)
	}
	rt := New(c, NewEventLog(buf), nil)
	if err := rt.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown() })
	return rt
}

// connectLevel connects, registers and (unless wantClosed) waits until synchronized.
func connectLevel(t *testing.T, rt *Runtime, o levelOpts, wantSynced bool) *levelPlugin {
	t.Helper()
	conn, err := net.Dial("unix", rt.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	lp := &levelPlugin{mux: mux.New(conn), label: o.idx + "-" + o.name, adjust: o.adjust,
		others: o.others, reject: o.reject}
	c1, _ := lp.mux.Open(mux.PluginServiceConn)
	c2, _ := lp.mux.Open(mux.RuntimeServiceConn)
	if lp.server, err = ttrpc.NewServer(); err != nil {
		t.Fatal(err)
	}
	lp.server.Register(pluginService, lp.methods(o.events))
	go func() { _ = lp.server.Serve(context.Background(), mux.NewListener(c1)) }()
	lp.client = ttrpc.NewClient(c2)
	t.Cleanup(func() { _ = lp.client.Close(); _ = lp.server.Close(); _ = lp.mux.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := lp.client.Call(ctx, runtimeService, "RegisterPlugin",
		&api.RegisterPluginRequest{PluginName: o.name, PluginIdx: o.idx}, &api.Empty{}); err != nil {
		if !wantSynced {
			// A plugin the runtime refuses (its Configure reply) may see the connection close
			// before the reply to RegisterPlugin is written ("ttrpc: closed", CI session 17):
			// the caller checks the refusal in the runtime's log.
			return lp
		}
		t.Fatal(err)
	}
	if !wantSynced {
		return lp
	}
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		for _, l := range rt.Plugins() {
			if l == lp.label {
				return lp
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin %s not synchronized; plugins %v", lp.label, rt.Plugins())
		}
	}
}

func (lp *levelPlugin) record(rpc string) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.rpcs = append(lp.rpcs, rpc)
}

func (lp *levelPlugin) methods(events int32) map[string]ttrpc.Method {
	empty := func(rpc string) ttrpc.Method {
		return func(_ context.Context, un func(interface{}) error) (interface{}, error) {
			lp.record(rpc)
			return &api.Empty{}, un(&api.ContainerEventRequest{})
		}
	}
	m := map[string]ttrpc.Method{
		"Configure": func(_ context.Context, un func(interface{}) error) (interface{}, error) {
			req := &api.ConfigureRequest{}
			err := un(req)
			lp.mu.Lock()
			lp.cfg = req
			lp.mu.Unlock()
			return &api.ConfigureResponse{Events: events}, err
		},
		"Synchronize": func(_ context.Context, un func(interface{}) error) (interface{}, error) {
			req := &api.SynchronizeRequest{}
			err := un(req)
			lp.mu.Lock()
			lp.syncMore = append(lp.syncMore, req.More)
			lp.mu.Unlock()
			return &api.SynchronizeResponse{More: req.More}, err
		},
		"StateChange": func(_ context.Context, un func(interface{}) error) (interface{}, error) {
			req := &api.StateChangeEvent{}
			err := un(req)
			lp.record("StateChange:" + req.Event.String())
			return &api.Empty{}, err
		},
		"CreateContainer": func(_ context.Context, un func(interface{}) error) (interface{}, error) {
			req := &api.CreateContainerRequest{}
			if err := un(req); err != nil {
				return nil, err
			}
			lp.record("CreateContainer")
			lp.mu.Lock()
			defer lp.mu.Unlock()
			lp.seen = append(lp.seen, req.Container)
			resp := &api.CreateContainerResponse{Update: lp.others}
			if lp.adjust != nil {
				resp.Adjust = &api.ContainerAdjustment{Linux: &api.LinuxContainerAdjustment{Resources: lp.adjust}}
			}
			return resp, nil
		},
		"ValidateContainerAdjustment": func(_ context.Context, un func(interface{}) error) (interface{}, error) {
			req := &api.ValidateContainerAdjustmentRequest{}
			if err := un(req); err != nil {
				return nil, err
			}
			lp.record("ValidateContainerAdjustment")
			lp.mu.Lock()
			defer lp.mu.Unlock()
			lp.owners = req.Owners
			return &api.ValidateContainerAdjustmentResponse{Reject: lp.reject != "", Reason: lp.reject}, nil
		},
	}
	for _, rpc := range dedicatedRPC {
		m[rpc] = empty(rpc)
	}
	return m
}

func (lp *levelPlugin) calls() []string {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return append([]string(nil), lp.rpcs...)
}

func eventBitOf(events ...api.Event) int32 {
	var m int32
	for _, e := range events {
		m |= 1 << (int32(e) - 1)
	}
	return m
}

// fakePod defines pod "p" with fake containers c1..cn and runs it.
func fakePod(t *testing.T, rt *Runtime, n int) {
	t.Helper()
	mustDo(t, rt, scenario.Step{Op: "add_pod", PodSpec: &scenario.Pod{Name: "p", QoS: "burstable",
		Labels: map[string]string{"koordinator.sh/qosClass": "LS"}}})
	for i := 1; i <= n; i++ {
		mustDo(t, rt, scenario.Step{Op: "add_container", CtrSpec: &scenario.Container{
			Name: fmt.Sprintf("c%d", i), Pod: "p", Fake: true}})
	}
	mustDo(t, rt, scenario.Step{Op: "run_pod", Pod: "p"})
}

func TestVersionsDifferWhereTheWireDoes(t *testing.T) {
	for _, tc := range []struct {
		v                                      Version
		mask                                   int32
		timeouts, chunked, dedicated, validate bool
		nri                                    string
		maxPayload                             int
		split                                  bool
	}{
		{V06, 0x7FF, false, false, false, false, "", 1 << 24, false},
		{V08, 0x7FF, true, true, false, false, "", mux.MaxPayload, true},
		{V011, 0x3FFF, true, true, false, true, "", mux.MaxPayload, true},
		{V012, 0x3FFF, true, true, true, true, "v0.12.0", mux.MaxPayload, true},
	} {
		mo := tc.v.MuxOptions()
		if tc.v.ValidMask() != tc.mask || tc.v.ConfigureTimeouts() != tc.timeouts ||
			tc.v.ChunkedSync() != tc.chunked || tc.v.DedicatedRPCs() != tc.dedicated ||
			tc.v.Validation() != tc.validate || tc.v.NRIVersion() != tc.nri ||
			mo.MaxPayload != tc.maxPayload || mo.Split != tc.split {
			t.Errorf("%s: got mask 0x%x timeouts %v chunked %v dedicated %v validate %v nri %q mux %+v",
				tc.v, tc.v.ValidMask(), tc.v.ConfigureTimeouts(), tc.v.ChunkedSync(),
				tc.v.DedicatedRPCs(), tc.v.Validation(), tc.v.NRIVersion(), mo)
		}
		if got, err := ParseVersion(string(tc.v) + ".1"); err != nil || got != tc.v {
			t.Errorf("ParseVersion(%s.1) = %v, %v", tc.v, got, err)
		}
	}
	if _, err := ParseVersion("v0.9"); err == nil {
		t.Error("v0.9 accepted")
	}
}

func TestConfigureFieldsPerLevel(t *testing.T) {
	for _, v := range Versions {
		buf := &syncBuf{}
		rt := newLevelRuntime(t, buf, v, nil)
		lp := connectLevel(t, rt, levelOpts{name: "cfg", idx: "10", events: 0x1}, true)
		lp.mu.Lock()
		cfg := lp.cfg
		lp.mu.Unlock()
		if (cfg.RequestTimeout != 0) != v.ConfigureTimeouts() || (cfg.RegistrationTimeout != 0) != v.ConfigureTimeouts() {
			t.Errorf("%s: timeouts %d/%d", v, cfg.RegistrationTimeout, cfg.RequestTimeout)
		}
		if cfg.NRIVersion != v.NRIVersion() || cfg.Config != "" {
			t.Errorf("%s: NRI_version %q config %q", v, cfg.NRIVersion, cfg.Config)
		}
	}
}

// Bit 13 (ValidateContainerAdjustment) closes the plugin below v0.10 and is accepted from v0.11.
func TestEventMaskPerLevel(t *testing.T) {
	for _, v := range Versions {
		buf := &syncBuf{}
		rt := newLevelRuntime(t, buf, v, nil)
		want := v.Validation()
		connectLevel(t, rt, levelOpts{name: "val", idx: "10", events: 0x2000 | 0x8}, want)
		if !want {
			waitLog(t, buf, "invalid plugin events 0x2008")
		}
	}
}

// <= v0.6 sends Synchronize as one message (no `more`), whatever --sync-max-objects says.
func TestSynchronizeChunkingPerLevel(t *testing.T) {
	for _, v := range []Version{V06, V08} {
		buf := &syncBuf{}
		rt := newLevelRuntime(t, buf, v, func(c *Config) { c.SyncMaxObjects = 10 })
		if err := rt.Synthesize(5, 40); err != nil {
			t.Fatal(err)
		}
		lp := connectLevel(t, rt, levelOpts{name: "sync", idx: "10", events: 0x1}, true)
		lp.mu.Lock()
		more := append([]bool(nil), lp.syncMore...)
		lp.mu.Unlock()
		if v == V06 && (len(more) != 1 || more[0]) {
			t.Errorf("v0.6: sync messages %v, want one without more", more)
		}
		if v == V08 && (len(more) != 5 || !more[0] || more[4]) {
			t.Errorf("v0.8: sync messages %v, want 5 chunks", more)
		}
	}
}

// The <= v0.6.1 mux refuses a write over 16 MiB (EMSGSIZE, trunk stays up); >= v0.7 splits it.
func TestLegacyMuxRefusesOversizeWrites(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	m := mux.NewWithOptions(a, mux.Options{MaxPayload: 64, Split: false})
	defer m.Close()
	c, _ := m.Open(mux.PluginServiceConn)
	if _, err := c.Write(make([]byte, 65)); err == nil || !strings.Contains(err.Error(), "message too long") {
		t.Fatalf("oversize write: %v", err)
	}
	select {
	case <-m.Done():
		t.Fatal("trunk closed by a refused write")
	default:
	}
}

func TestPodEventsStateChangeOrDedicatedPerLevel(t *testing.T) {
	for _, v := range Versions {
		buf := &syncBuf{}
		rt := newLevelRuntime(t, buf, v, nil)
		lp := connectLevel(t, rt, levelOpts{name: "ev", idx: "10",
			events: eventBitOf(api.Event_RUN_POD_SANDBOX, api.Event_CREATE_CONTAINER, api.Event_START_CONTAINER)}, true)
		fakePod(t, rt, 1)
		mustDo(t, rt, scenario.Step{Op: "create_start", Container: "c1"})
		got := strings.Join(lp.calls(), ",")
		want := "StateChange:RUN_POD_SANDBOX,CreateContainer,StateChange:START_CONTAINER"
		if v.DedicatedRPCs() {
			want = "RunPodSandbox,CreateContainer,StartContainer"
		}
		if got != want {
			t.Errorf("%s: calls %s, want %s", v, got, want)
		}
	}
}

func cpus(s string) *api.LinuxResources { return &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: s}} }

// Two plugins setting the same field at CreateContainer fail the creation at every level, with
// the level's wording; the later plugin sees the earlier one's adjustment; different fields merge.
func TestOwnershipConflictFailsCreation(t *testing.T) {
	create := eventBitOf(api.Event_CREATE_CONTAINER)
	for _, v := range Versions {
		buf := &syncBuf{}
		rt := newLevelRuntime(t, buf, v, nil)
		a := connectLevel(t, rt, levelOpts{name: "koord", idx: "10", events: create, adjust: cpus("0-1")}, true)
		b := connectLevel(t, rt, levelOpts{name: "colod", idx: "50", events: create, adjust: cpus("2-3")}, true)
		fakePod(t, rt, 2)
		_, err := rt.Do(scenario.Step{Op: "create", Container: "c1"})
		prefix := `plugins "50-colod" and "10-koord" both tried to set `
		if err == nil || !strings.Contains(err.Error(), prefix) {
			t.Fatalf("%s: create err %v", v, err)
		}
		if v.Validation() != strings.Contains(err.Error(), "CPUSetCPUs") {
			t.Errorf("%s: wording %v", v, err)
		}
		waitLog(t, buf, `"event":"ownership-conflict"`)
		waitLog(t, buf, `"other":"10-koord"`)
		if _, ok := rt.ctrs["c1"]; ok {
			t.Errorf("%s: c1 created despite the conflict", v)
		}
		b.mu.Lock()
		sawEarlier := len(b.seen) == 1 && b.seen[0].Linux.Resources.Cpu.Cpus == "0-1"
		b.adjust = &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: &api.OptionalUInt64{Value: 2}}}
		b.mu.Unlock()
		if !sawEarlier {
			t.Errorf("%s: the later plugin did not see the earlier adjustment", v)
		}
		mustDo(t, rt, scenario.Step{Op: "create", Container: "c2"})
		res := rt.ctrs["c2"].res
		if res.Cpu.Cpus != "0-1" || res.Cpu.Shares.Value != 2 {
			t.Errorf("%s: merged %v", v, res.Cpu)
		}
		_ = a
	}
}

// A conflicting update of another container is dropped with ignore_failure, else fails.
func TestConflictingUpdateOfAnotherContainer(t *testing.T) {
	buf := &syncBuf{}
	rt := newLevelRuntime(t, buf, V08, nil)
	create := eventBitOf(api.Event_CREATE_CONTAINER)
	fakePod(t, rt, 3)
	mustDo(t, rt, scenario.Step{Op: "create", Container: "c1"})
	id := rt.ctrs["c1"].id
	up := func(s string, ignore bool) []*api.ContainerUpdate {
		return []*api.ContainerUpdate{{ContainerId: id, IgnoreFailure: ignore,
			Linux: &api.LinuxContainerUpdate{Resources: cpus(s)}}}
	}
	connectLevel(t, rt, levelOpts{name: "a", idx: "10", events: create, others: up("0", false)}, true)
	b := connectLevel(t, rt, levelOpts{name: "b", idx: "20", events: create, others: up("1", true)}, true)
	mustDo(t, rt, scenario.Step{Op: "create", Container: "c2"})
	if got := rt.ctrs["c1"].res.Cpu.Cpus; got != "0" {
		t.Errorf("c1 cpus %q, want the first plugin's 0", got)
	}
	waitLog(t, buf, `"dropped":true`)
	b.mu.Lock()
	b.others = up("1", false)
	b.mu.Unlock()
	if _, err := rt.Do(scenario.Step{Op: "create", Container: "c3"}); err == nil {
		t.Error("a conflicting update without ignore_failure did not fail the creation")
	}
}

// v0.11+: validators get the owners of every field; a rejection fails the creation.
func TestValidatorGetsOwnersAndCanReject(t *testing.T) {
	buf := &syncBuf{}
	rt := newLevelRuntime(t, buf, V011, nil)
	create := eventBitOf(api.Event_CREATE_CONTAINER)
	connectLevel(t, rt, levelOpts{name: "topo", idx: "20", events: create, adjust: cpus("3")}, true)
	val := connectLevel(t, rt, levelOpts{name: "colod", idx: "50",
		events: create | eventBitOf(api.Event_VALIDATE_CONTAINER_ADJUSTMENT)}, true)
	fakePod(t, rt, 2)
	mustDo(t, rt, scenario.Step{Op: "create", Container: "c1"})
	val.mu.Lock()
	owners := val.owners
	val.reject = "no"
	val.mu.Unlock()
	id := rt.ctrs["c1"].id
	if owners == nil || owners.Owners[id] == nil || owners.Owners[id].Simple[int32(fieldCPUSetCPUs)] != "20-topo" {
		t.Fatalf("owners %v", owners)
	}
	waitLog(t, buf, `"CPUSetCPUs":"20-topo"`)
	if _, err := rt.Do(scenario.Step{Op: "create", Container: "c2"}); err == nil ||
		!strings.Contains(err.Error(), "rejected") {
		t.Fatalf("rejected create: %v", err)
	}
}

// TestMain doubles as a pre-installed plugin: started by the runtime with NRI_PLUGIN_SOCKET set,
// the test binary registers over fd 3 and serves until the runtime closes it.
func TestMain(m *testing.M) {
	if os.Getenv("NRI_PLUGIN_SOCKET") != "" {
		os.Exit(runLaunchedHelper())
	}
	os.Exit(m.Run())
}

func runLaunchedHelper() int {
	f := os.NewFile(3, "nri")
	conn, err := net.FileConn(f)
	if err != nil {
		return 2
	}
	m := mux.New(conn)
	c1, _ := m.Open(mux.PluginServiceConn)
	c2, _ := m.Open(mux.RuntimeServiceConn)
	srv, _ := ttrpc.NewServer()
	srv.Register(pluginService, map[string]ttrpc.Method{
		"Configure": func(_ context.Context, un func(interface{}) error) (interface{}, error) {
			req := &api.ConfigureRequest{}
			err := un(req)
			// The config the runtime read for us picks the mask, so the test can see it arrived.
			ev := int32(0x1)
			if strings.TrimSpace(req.Config) == "mask: 0x9" {
				ev = 0x9
			}
			return &api.ConfigureResponse{Events: ev}, err
		},
		"Synchronize": func(_ context.Context, un func(interface{}) error) (interface{}, error) {
			req := &api.SynchronizeRequest{}
			err := un(req)
			return &api.SynchronizeResponse{More: req.More}, err
		},
	})
	go func() { _ = srv.Serve(context.Background(), mux.NewListener(c1)) }()
	client := ttrpc.NewClient(c2)
	// Registered name tells the test what the child saw: its environment, exactly.
	name := "envbad"
	if len(os.Environ()) == 3 && os.Getenv("NRI_PLUGIN_SOCKET") == "3" {
		name = "envok"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := client.Call(ctx, runtimeService, "RegisterPlugin",
		&api.RegisterPluginRequest{PluginName: name, PluginIdx: os.Getenv("NRI_PLUGIN_IDX")}, &api.Empty{}); err != nil {
		return 3
	}
	<-m.Done()
	return 0
}

func TestPreInstalledPluginIsLaunchedOnAnInheritedFd(t *testing.T) {
	dir, cfgDir := t.TempDir(), t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "10-gotest")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not executable"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "gotest.conf"), []byte("mask: 0x9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	buf := &syncBuf{}
	rt := newLevelRuntime(t, buf, V08, func(c *Config) { c.PluginDir, c.PluginConfigDir = dir, cfgDir })
	waitLog(t, buf, `"registered_as":"10-envok"`)
	waitLog(t, buf, `"events":"0x9"`)
	if pl, _ := rt.waitPlugins(1, 3*time.Second); len(pl.([]string)) != 1 || pl.([]string)[0] != "10-gotest" {
		t.Fatalf("plugins %v", pl)
	}
	// A restart kills it and launches it again, as a new runtime process would.
	if err := rt.Restart(50 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitLog(t, buf, `"event":"plugin-exited"`)
	for deadline := time.Now().Add(5 * time.Second); strings.Count(buf.String(), `"event":"plugin-synchronized"`) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("not relaunched:\n%s", buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBadlyNamedExecutableFailsDiscovery(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "colod"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rt := New(Config{SocketPath: filepath.Join(t.TempDir(), "nri.sock"), Version: V06, PluginDir: dir,
		RegistrationTimeout: time.Second, RequestTimeout: time.Second}, NewEventLog(&syncBuf{}), nil)
	defer rt.Shutdown()
	if err := rt.Listen(); err == nil || !strings.Contains(err.Error(), "NN-name") {
		t.Fatalf("Listen: %v", err)
	}
}
