// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "colod/nriapi"
	"colod/testpeer/cgroup"
	"colod/testpeer/mux"
	"colod/testpeer/scenario"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func newTestRuntime(t *testing.T, buf *syncBuf) *Runtime {
	t.Helper()
	rt := New(Config{SocketPath: filepath.Join(t.TempDir(), "nri.sock"), Version: V012,
		RegistrationTimeout: 300 * time.Millisecond, RequestTimeout: time.Second}, NewEventLog(buf), nil)
	if err := rt.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown() })
	return rt
}

func waitLog(t *testing.T, buf *syncBuf, substr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("log never contained %q:\n%s", substr, buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A plugin that sends a 6130-byte frame (protocol brief §1.5) is cut off, as by a Go runtime.
func TestOversizedFrameClosesThePlugin(t *testing.T) {
	buf := &syncBuf{}
	rt := newTestRuntime(t, buf)
	c, err := net.Dial("unix", rt.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := make([]byte, 8+6130)
	binary.BigEndian.PutUint32(frame[0:4], 2)
	binary.BigEndian.PutUint32(frame[4:8], 6130)
	binary.BigEndian.PutUint32(frame[8:12], 6120) // a plausible ttrpc header inside
	binary.BigEndian.PutUint32(frame[12:16], 1)
	frame[16] = 1
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	waitLog(t, buf, "frame rule")
	if len(rt.Plugins()) != 0 {
		t.Fatal("plugin registered")
	}
}

func TestSilentPluginHitsRegistrationTimeout(t *testing.T) {
	buf := &syncBuf{}
	rt := newTestRuntime(t, buf)
	c, err := net.Dial("unix", rt.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitLog(t, buf, "plugin registration timed out")
}

func TestRestartRemovesAndRecreatesTheSocket(t *testing.T) {
	buf := &syncBuf{}
	rt := newTestRuntime(t, buf)
	done := make(chan error, 1)
	go func() { done <- rt.Restart(200 * time.Millisecond) }()
	time.Sleep(100 * time.Millisecond)
	if _, err := net.Dial("unix", rt.cfg.SocketPath); err == nil {
		t.Fatal("socket still accepting while the runtime is down")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", rt.cfg.SocketPath)
	if err != nil {
		t.Fatalf("socket not back: %v", err)
	}
	c.Close()
}

// testPlugin is the plugin end of one NRI connection, in Go: our mux, a ttrpc server for the
// Plugin service on conn 1 and a ttrpc client for the Runtime service on conn 2.
type testPlugin struct {
	mux    *mux.Mux
	client *ttrpc.Client
	server *ttrpc.Server

	mu      sync.Mutex
	updates int                 // UpdateContainer calls seen
	adjust  *api.LinuxResources // the reply's update of the container, if set
}

// connectPlugin registers a plugin subscribed to events and waits until it is synchronized.
func connectPlugin(t *testing.T, rt *Runtime, events int32) *testPlugin {
	t.Helper()
	conn, err := net.Dial("unix", rt.cfg.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	tp := &testPlugin{mux: mux.New(conn)}
	c1, _ := tp.mux.Open(mux.PluginServiceConn)
	c2, _ := tp.mux.Open(mux.RuntimeServiceConn)
	if tp.server, err = ttrpc.NewServer(); err != nil {
		t.Fatal(err)
	}
	tp.server.Register(pluginService, tp.methods(events))
	go func() { _ = tp.server.Serve(context.Background(), mux.NewListener(c1)) }()
	tp.client = ttrpc.NewClient(c2)
	t.Cleanup(tp.close)
	// A unique name: a plugin closed a moment ago may still be listed until its serve goroutine
	// removes it, so counting plugins would not tell which one is synchronized.
	pluginSeq++
	name := fmt.Sprintf("fault%d", pluginSeq)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := tp.client.Call(ctx, runtimeService, "RegisterPlugin",
		&api.RegisterPluginRequest{PluginName: name, PluginIdx: "10"}, &api.Empty{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		for _, l := range rt.Plugins() {
			if l == "10-"+name {
				return tp
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin %s not synchronized; plugins %v", name, rt.Plugins())
		}
	}
}

var pluginSeq int

func (tp *testPlugin) close() {
	_ = tp.client.Close()
	_ = tp.server.Close()
	_ = tp.mux.Close()
}

func (tp *testPlugin) methods(events int32) map[string]ttrpc.Method {
	return map[string]ttrpc.Method{
		"Configure": func(_ context.Context, un func(interface{}) error) (interface{}, error) {
			return &api.ConfigureResponse{Events: events}, un(&api.ConfigureRequest{})
		},
		"Synchronize": func(_ context.Context, un func(interface{}) error) (interface{}, error) {
			req := &api.SynchronizeRequest{}
			err := un(req)
			return &api.SynchronizeResponse{More: req.More}, err
		},
		"UpdateContainer": func(_ context.Context, un func(interface{}) error) (interface{}, error) {
			req := &api.UpdateContainerRequest{}
			if err := un(req); err != nil {
				return nil, err
			}
			tp.mu.Lock()
			defer tp.mu.Unlock()
			tp.updates++
			resp := &api.UpdateContainerResponse{}
			if tp.adjust != nil {
				resp.Update = []*api.ContainerUpdate{{ContainerId: req.Container.Id,
					Linux: &api.LinuxContainerUpdate{Resources: tp.adjust}}}
			}
			return resp, nil
		},
	}
}

func (tp *testPlugin) seenUpdates() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.updates
}

// setQuota is the plugin's unsolicited UpdateContainers of one container's CFS quota.
func (tp *testPlugin) setQuota(id string, quota int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := &api.UpdateContainersRequest{Update: []*api.ContainerUpdate{{ContainerId: id,
		Linux: &api.LinuxContainerUpdate{Resources: &api.LinuxResources{
			Cpu: &api.LinuxCPU{Quota: &api.OptionalInt64{Value: quota}}}}}}}
	return tp.client.Call(ctx, runtimeService, "UpdateContainers", req, &api.UpdateContainersResponse{})
}

const updateContainerEvents = 1 << (int32(api.Event_UPDATE_CONTAINER) - 1)

// fakeCgroupRoot is a cgroup tree of plain files: v1 hybrid (cpu, cpuacct, cpuset, memory,
// cgroup2 at unified/) or pure v2.
func fakeCgroupRoot(t *testing.T, v2 bool) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{"cgroup.controllers": "cpuset cpu memory"}
	if !v2 {
		files = map[string]string{"cpu/.keep": "", "cpuacct/.keep": "", "memory/.keep": "",
			"cpuset/cpuset.cpus": "0-3\n", "cpuset/cpuset.mems": "0\n", "unified/cgroup.controllers": ""}
	}
	for f, v := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// newCgroupRuntime is a runtime whose containers are real processes in a fake cgroup tree,
// with one running container "c" (1 CPU limit, 0.5 request, 256 MiB) in pod "p".
func newCgroupRuntime(t *testing.T, buf *syncBuf, v2 bool) (*Runtime, *container) {
	t.Helper()
	elog := NewEventLog(buf)
	cg, err := cgroup.New(cgroup.Options{Root: fakeCgroupRoot(t, v2), CreateFiles: true,
		Log: func(ch cgroup.Change) {
			elog.Log("cgroup-write", Fields{"container": ch.Container, "file": ch.File, "new": ch.New})
		}})
	if err != nil {
		t.Fatal(err)
	}
	rt := New(Config{SocketPath: filepath.Join(t.TempDir(), "nri.sock"), Version: V012,
		RegistrationTimeout: time.Second, RequestTimeout: time.Second, CgroupParent: "tp",
		CgroupDriver: "cgroupfs"}, elog, cg)
	if err := rt.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown() })
	mustDo(t, rt, scenario.Step{Op: "add_pod", PodSpec: &scenario.Pod{Name: "p", QoS: "burstable"}})
	mustDo(t, rt, scenario.Step{Op: "add_container", CtrSpec: &scenario.Container{Name: "c", Pod: "p",
		Command: []string{"sleep", "60"}, Resources: &scenario.Resources{CPURequestMilli: 500,
			CPULimitMilli: 1000, MemoryLimitBytes: 256 << 20}}})
	mustDo(t, rt, scenario.Step{Op: "run_pod", Pod: "p"})
	mustDo(t, rt, scenario.Step{Op: "create_start", Container: "c"})
	return rt, rt.ctrs["c"]
}

func mustDo(t *testing.T, rt *Runtime, s scenario.Step) interface{} {
	t.Helper()
	res, err := rt.Do(s)
	if err != nil {
		t.Fatalf("%s: %v", s.Op, err)
	}
	return res
}

// stateOf is the state op's reply as the control socket sends it (JSON numbers, nulls).
func stateOf(t *testing.T, rt *Runtime, name string) map[string]interface{} {
	t.Helper()
	b, err := json.Marshal(mustDo(t, rt, scenario.Step{Op: "state", Container: name}))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]interface{}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// quotas returns (spec, cgroup) cpu_quota of the state op.
func quotas(t *testing.T, rt *Runtime, name string) (interface{}, interface{}) {
	t.Helper()
	st := stateOf(t, rt, name)
	return st["spec"].(map[string]interface{})["cpu_quota"],
		st["cgroup"].(map[string]interface{})["cpu_quota"]
}

func TestRefuseUpdatesAppliesNothingAndCountsDown(t *testing.T) {
	buf := &syncBuf{}
	rt, c := newCgroupRuntime(t, buf, false)
	tp := connectPlugin(t, rt, updateContainerEvents)
	mustDo(t, rt, scenario.Step{Op: "refuse_updates", Count: 2, Message: "injected"})
	writes := strings.Count(buf.String(), `"cgroup-write"`)
	for i, want := range []string{`"remaining":1`, `"remaining":0`} {
		err := tp.setQuota(c.id, 30000)
		if st, _ := status.FromError(err); st.Code() != codes.Unknown || st.Message() != "injected" {
			t.Fatalf("refusal %d: err = %v, want status Unknown \"injected\"", i, err)
		}
		waitLog(t, buf, `"event":"update-refused"`)
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("refusal %d: no update-refused with %s:\n%s", i, want, buf.String())
		}
	}
	if spec, cg := quotas(t, rt, "c"); spec != 100000.0 || cg != 100000.0 {
		t.Fatalf("refused updates applied: spec quota %v, cgroup quota %v", spec, cg)
	}
	if n := strings.Count(buf.String(), `"cgroup-write"`); n != writes {
		t.Fatalf("%d cgroup writes during refusals", n-writes)
	}
	if strings.Contains(buf.String(), `"update-request"`) {
		t.Fatal("a refused call was logged as update-request")
	}
	// The third call is past the count: served normally.
	if err := tp.setQuota(c.id, 30000); err != nil {
		t.Fatal(err)
	}
	if spec, cg := quotas(t, rt, "c"); spec != 30000.0 || cg != 30000.0 {
		t.Fatalf("update after the refusals: spec quota %v, cgroup quota %v", spec, cg)
	}
	// Count 0 cancels pending refusals; the default message is containerd's.
	mustDo(t, rt, scenario.Step{Op: "refuse_updates", Count: 1})
	if err := tp.setQuota(c.id, 40000); status.Convert(err).Message() != updateFailedMsg {
		t.Fatalf("default refusal: %v", err)
	}
	mustDo(t, rt, scenario.Step{Op: "refuse_updates", Count: 5})
	mustDo(t, rt, scenario.Step{Op: "refuse_updates", Count: 0})
	if err := tp.setQuota(c.id, 40000); err != nil {
		t.Fatalf("after cancel: %v", err)
	}
}

func TestLoseRepliesAppliesThenClosesTheConnection(t *testing.T) {
	buf := &syncBuf{}
	rt, c := newCgroupRuntime(t, buf, false)
	tp := connectPlugin(t, rt, updateContainerEvents)
	mustDo(t, rt, scenario.Step{Op: "lose_replies", Count: 1})
	err := tp.setQuota(c.id, 30000)
	if err == nil {
		t.Fatal("reply arrived")
	}
	if st, ok := status.FromError(err); ok {
		t.Fatalf("got a status reply %v, want the connection lost", st)
	}
	select {
	case <-tp.mux.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("connection still open")
	}
	if spec, cg := quotas(t, rt, "c"); spec != 30000.0 || cg != 30000.0 {
		t.Fatalf("update not applied: spec quota %v, cgroup quota %v", spec, cg)
	}
	log := buf.String()
	req, res := strings.Index(log, `"update-request"`), strings.Index(log, `"update-result"`)
	lost := strings.Index(log, `"update-reply-lost"`)
	closed := strings.Index(log, "update reply lost (fault injection)")
	if req < 0 || res < req || lost < res || closed < lost {
		t.Fatalf("want update-request, update-result, update-reply-lost, plugin-closed in order:\n%s", log)
	}
	// The count is used up: a reconnected plugin gets its reply.
	tp2 := connectPlugin(t, rt, updateContainerEvents)
	if err := tp2.setQuota(c.id, 40000); err != nil {
		t.Fatal(err)
	}
}

// With ms, the lost reply starts an outage: the plugin cannot reconnect until it ends, and a
// kubelet update made meanwhile is what the runtime holds when it does.
func TestLoseRepliesWithMsKeepsTheRuntimeAway(t *testing.T) {
	buf := &syncBuf{}
	rt, c := newCgroupRuntime(t, buf, false)
	tp := connectPlugin(t, rt, updateContainerEvents)
	mustDo(t, rt, scenario.Step{Op: "lose_replies", Count: 1, Ms: 1000})
	lost := time.Now()
	if err := tp.setQuota(c.id, 30000); err == nil {
		t.Fatal("reply arrived")
	}
	if _, err := net.Dial("unix", rt.cfg.SocketPath); err == nil {
		t.Fatal("socket accepting right after the lost reply")
	}
	if spec, cg := quotas(t, rt, "c"); spec != 30000.0 || cg != 30000.0 {
		t.Fatalf("update not applied: spec quota %v, cgroup quota %v", spec, cg)
	}
	mustDo(t, rt, scenario.Step{Op: "update", Container: "c",
		Resources: &scenario.Resources{CPULimitMilli: 700}})
	waitLog(t, buf, `"event":"outage-end"`)
	if d := time.Since(lost); d < 1000*time.Millisecond {
		t.Fatalf("outage ended %v after the lost reply", d)
	}
	log := buf.String()
	if lostAt, down := strings.Index(log, `"update-reply-lost"`), strings.Index(log, `"outage":true`); lostAt < 0 || down < lostAt {
		t.Fatalf("want update-reply-lost, then the outage:\n%s", log)
	}
	tp2 := connectPlugin(t, rt, updateContainerEvents)
	if spec, cg := quotas(t, rt, "c"); spec != 70000.0 || cg != 70000.0 {
		t.Fatalf("after the outage: spec quota %v, cgroup quota %v, want the kubelet's 70000", spec, cg)
	}
	if err := tp2.setQuota(c.id, 40000); err != nil {
		t.Fatal(err)
	}
}

// The kubelet update op asks every subscribed plugin and merges their adjustments.
func TestKubeletUpdateMergesPluginAdjustment(t *testing.T) {
	buf := &syncBuf{}
	rt, _ := newCgroupRuntime(t, buf, false)
	tp := connectPlugin(t, rt, updateContainerEvents)
	tp.mu.Lock()
	tp.adjust = &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: &api.OptionalInt64{Value: 20000}}}
	tp.mu.Unlock()
	mustDo(t, rt, scenario.Step{Op: "update", Container: "c",
		Resources: &scenario.Resources{CPULimitMilli: 1500}})
	if tp.seenUpdates() != 1 {
		t.Fatalf("plugin saw %d UpdateContainer", tp.seenUpdates())
	}
	if spec, cg := quotas(t, rt, "c"); spec != 20000.0 || cg != 20000.0 {
		t.Fatalf("adjustment not merged: spec quota %v, cgroup quota %v", spec, cg)
	}
}

func TestOutageReturnsAtOnceAndTheSocketComesBack(t *testing.T) {
	buf := &syncBuf{}
	rt, _ := newCgroupRuntime(t, buf, false)
	tp := connectPlugin(t, rt, updateContainerEvents)
	start := time.Now()
	// Long enough that a blocking op could not pass for a slow non-blocking one on a busy host.
	mustDo(t, rt, scenario.Step{Op: "outage", Ms: 1000})
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("outage op took %v", d)
	}
	select {
	case <-tp.mux.Done():
	case <-time.After(time.Second):
		t.Fatal("plugin connection not closed by the outage")
	}
	if _, err := net.Dial("unix", rt.cfg.SocketPath); err == nil {
		t.Fatal("socket accepting during the outage")
	}
	if _, err := rt.Do(scenario.Step{Op: "outage", Ms: 100}); err == nil {
		t.Fatal("second outage accepted while one is in progress")
	}
	// A kubelet update during the outage reaches the cgroup and spec, and no plugin.
	mustDo(t, rt, scenario.Step{Op: "update", Container: "c",
		Resources: &scenario.Resources{CPULimitMilli: 700}})
	if spec, cg := quotas(t, rt, "c"); spec != 70000.0 || cg != 70000.0 {
		t.Fatalf("update during the outage: spec quota %v, cgroup quota %v", spec, cg)
	}
	if tp.seenUpdates() != 0 || strings.Contains(buf.String(), `"call-failed"`) {
		t.Fatalf("update relayed during the outage:\n%s", buf.String())
	}
	waitLog(t, buf, `"event":"outage-end"`)
	if d := time.Since(start); d < 1000*time.Millisecond {
		t.Fatalf("outage ended after %v", d)
	}
	conn, err := net.Dial("unix", rt.cfg.SocketPath)
	if err != nil {
		t.Fatalf("socket not back: %v", err)
	}
	conn.Close()
	connectPlugin(t, rt, updateContainerEvents)
	// restart_runtime waits for an outage instead of racing it for the socket.
	mustDo(t, rt, scenario.Step{Op: "outage", Ms: 300})
	start = time.Now()
	mustDo(t, rt, scenario.Step{Op: "restart_runtime", DelayMs: 50})
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("restart overlapped the outage (took %v)", d)
	}
}

func TestStateOfAFakeContainerOverTheControlSocket(t *testing.T) {
	buf := &syncBuf{}
	rt := newTestRuntime(t, buf)
	ctl, err := ServeControl(rt, filepath.Join(t.TempDir(), "ctl.sock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	conn, err := net.Dial("unix", ctl.path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	send := func(line string) string {
		t.Helper()
		if _, err := conn.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		if !sc.Scan() {
			t.Fatalf("%s: no reply: %v", line, sc.Err())
		}
		return sc.Text()
	}
	for _, l := range []string{
		`{"op":"add_pod","pod_spec":{"name":"p","qos":"burstable"}}`,
		`{"op":"add_container","container_spec":{"name":"f","pod":"p","fake":true,"resources":` +
			`{"cpu_request_milli":500,"cpu_limit_milli":1000,"memory_limit_bytes":268435456,"cpus":"1,0"}}}`,
		`{"op":"run_pod","pod":"p"}`, `{"op":"create_start","container":"f"}`,
		`{"op":"refuse_updates","count":1,"message":"m"}`, `{"op":"lose_replies","count":0}`,
	} {
		if r := send(l); !strings.HasPrefix(r, `{"ok":true`) {
			t.Fatalf("%s → %s", l, r)
		}
	}
	var r struct {
		OK     bool
		Result map[string]json.RawMessage
	}
	if err := json.Unmarshal([]byte(send(`{"op":"state","container":"f"}`)), &r); err != nil || !r.OK {
		t.Fatalf("state: %v %+v", err, r)
	}
	want := `{"cpu_period":100000,"cpu_quota":100000,"cpu_shares":512,"cpus":"0-1","memory_limit":268435456,"mems":null}`
	if got := string(r.Result["spec"]); got != want {
		t.Errorf("spec = %s\nwant %s", got, want)
	}
	if got := string(r.Result["cgroup"]); got != "null" {
		t.Errorf("cgroup of a fake container = %s", got)
	}
	if got := string(r.Result["state"]); got != `"CONTAINER_RUNNING"` || len(r.Result["id"]) != 66 {
		t.Errorf("state %s id %s", got, r.Result["id"])
	}
	if got := send(`{"op":"state","container":"nope"}`); !strings.Contains(got, `"ok":false`) {
		t.Errorf("state of an unknown container: %s", got)
	}
	if got := send(`{"op":"outage"}`); !strings.Contains(got, `needs \"ms\"`) {
		t.Errorf("outage without ms: %s", got)
	}
}

func TestStateReadsTheCgroupFilesBack(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		buf := &syncBuf{}
		rt, _ := newCgroupRuntime(t, buf, v2)
		mustDo(t, rt, scenario.Step{Op: "update", Container: "c",
			Resources: &scenario.Resources{Cpus: "0,1", Mems: "0"}})
		st := stateOf(t, rt, "c")
		spec, cg := st["spec"].(map[string]interface{}), st["cgroup"].(map[string]interface{})
		wantSpec := map[string]interface{}{"cpu_quota": 100000.0, "cpu_period": 100000.0,
			"cpu_shares": 512.0, "cpus": "0-1", "mems": "0", "memory_limit": float64(256 << 20)}
		wantCg := map[string]interface{}{"cpu_quota": 100000.0, "cpu_period": 100000.0,
			"cpu_shares": 512.0, "cpus": "0-1", "mems": "0", "memory_limit": float64(256 << 20)}
		if v2 {
			// weight 1 + 510·9999/262142 = 20; back: the smallest shares of weight 20.
			wantSpec["cpu_weight"], wantCg["cpu_weight"], wantCg["cpu_shares"] = 20.0, 20.0, 501.0
		}
		if st["cgroup_mode"] != map[bool]string{false: "v1", true: "v2"}[v2] ||
			st["state"] != "CONTAINER_RUNNING" || st["cgroup_rel"] == "" {
			t.Errorf("v2=%v: state %v", v2, st)
		}
		for name, pair := range map[string][2]map[string]interface{}{"spec": {spec, wantSpec},
			"cgroup": {cg, wantCg}} {
			if !reflect.DeepEqual(pair[0], pair[1]) {
				t.Errorf("v2=%v: %s = %v\nwant %v", v2, name, pair[0], pair[1])
			}
		}
	}
}

func TestStateParsing(t *testing.T) {
	for in, want := range map[string]string{"3,0-1,2": "0-3", "0": "0", " 5-7,1 ": "1,5-7",
		"0-4294967295,7": "0-4294967295", "2-1": "2-1", "x": "x", "": ""} {
		if got := normalizeList(in); got != want {
			t.Errorf("normalizeList(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]int64{"9223372036854771712": -1, "9223372036854710272": -1,
		"268435456": 268435456} {
		if got, err := parseV1Limit(in); err != nil || got != want {
			t.Errorf("parseV1Limit(%q) = %d, %v", in, got, err)
		}
	}
	rd := func(files map[string]string) readFn {
		return func(f string) (string, bool, error) { v, ok := files[f]; return v, ok, nil }
	}
	out := map[string]interface{}{}
	if err := readV2State(rd(map[string]string{"cpu.max": "max 100000", "memory.max": "max",
		"cpu.weight": "39"}), out); err != nil {
		t.Fatal(err)
	}
	if out["cpu_quota"] != int64(-1) || out["cpu_period"] != int64(100000) ||
		out["memory_limit"] != int64(-1) || out["cpu_shares"] != int64(999) {
		t.Errorf("v2 state %v", out)
	}
	if err := readV2State(rd(map[string]string{"cpu.max": "max"}), out); err == nil {
		t.Error("cpu.max without a period accepted")
	}
}

// Synthetic containers pointed at someone else's cgroups report those paths, one each, and every
// k-th synthetic pod is BestEffort (its cgroup parent says so, as colod classifies tiers).
func TestSynthesizeWithCgroupsAndBestEffortPods(t *testing.T) {
	rt := newTestRuntime(t, &syncBuf{})
	if err := rt.SynthesizeWith(SynthOptions{Pods: 4, Containers: 8, CgroupPrefix: "/bench/cg",
		BestEffortEvery: 2}); err != nil {
		t.Fatal(err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	paths := map[string]bool{}
	be := 0
	for _, c := range rt.ctrs {
		paths[c.synthetic.Linux.CgroupsPath] = true
		if c.pod.qos == "besteffort" {
			be++
			if !strings.Contains(c.pod.cgroupParent, "besteffort") {
				t.Errorf("BestEffort pod's cgroup parent %q", c.pod.cgroupParent)
			}
		}
	}
	for i := 1; i <= 8; i++ {
		if !paths[fmt.Sprintf("/bench/cg%d", i)] {
			t.Errorf("no container reports /bench/cg%d: %v", i, paths)
		}
	}
	if be != 4 {
		t.Errorf("%d containers in BestEffort pods, want 4 (pods 2 and 4)", be)
	}
	if err := rt.SynthesizeWith(SynthOptions{Pods: 1, BestEffortEvery: -1}); err == nil {
		t.Error("a negative --synth-besteffort-every was accepted")
	}
}
