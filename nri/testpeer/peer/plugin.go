// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sync"
	"time"

	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "colod/nriapi"
	"colod/testpeer/mux"
)

const (
	pluginService  = "nri.pkg.api.v1alpha1.Plugin"
	runtimeService = "nri.pkg.api.v1alpha1.Runtime"
	maxSyncMsg     = 4 << 20 // ttrpc messageLengthMax
	minSyncObjects = 8
)

var (
	idxRe  = regexp.MustCompile(`^[0-9]{2}$`)
	nameRe = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)
)

// plugin is one connected plugin (runtime side of its trunk).
type plugin struct {
	rt     *Runtime
	seq    int
	mux    *mux.Mux
	client *ttrpc.Client
	server *ttrpc.Server

	name, idx string
	events    int32
	regC      chan *api.RegisterPluginRequest
	regOnce   sync.Once
	synced    bool

	closeOnce   sync.Once
	closeReason string
	unimpl      map[api.Event]bool

	launched *launchedPlugin // non-nil: pre-installed, started by this runtime
}

func (p *plugin) label() string {
	if p.name == "" {
		return fmt.Sprintf("#%d", p.seq)
	}
	return p.idx + "-" + p.name
}

// close drops the plugin (the runtime's "plugin closed"), once.
func (p *plugin) close(reason string) {
	p.closeOnce.Do(func() {
		p.closeReason = reason
		p.rt.log.Log("plugin-closed", Fields{"plugin": p.label(), "reason": reason})
		p.mux.Fail(errors.New(reason))
		_ = p.client.Close()
		_ = p.server.Close()
	})
}

func (p *plugin) subscribed(e api.Event) bool {
	return p.events&(1<<(uint(e)-1)) != 0
}

// fatal reports whether a call error closes the plugin (upstream: closed connection, protocol
// error, deadline) rather than being propagated to the operation.
func fatal(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ttrpc.ErrClosed) ||
		errors.Is(err, context.Canceled) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return true
	}
	return st.Code() == codes.DeadlineExceeded || st.Code() == codes.Canceled
}

// call makes one runtime→plugin call under the request timeout; fatal errors close the plugin.
func (p *plugin) call(ctx context.Context, method string, req, resp interface{}) error {
	start := time.Now()
	err := p.client.Call(ctx, pluginService, method, req, resp)
	us := time.Since(start).Microseconds()
	if err != nil {
		if fatal(err) {
			p.close(fmt.Sprintf("%s failed: %v", method, err))
		}
		p.rt.log.Log("call-failed", Fields{"plugin": p.label(), "rpc": method, "us": us, "error": err})
		return err
	}
	p.rt.log.Log("event-relayed", Fields{"plugin": p.label(), "rpc": method, "us": us})
	return nil
}

func (p *plugin) requestCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), p.rt.cfg.RequestTimeout)
}

// runtimeMethods is the Runtime service the plugin calls on conn 2.
func (p *plugin) runtimeMethods() map[string]ttrpc.Method {
	return map[string]ttrpc.Method{
		"RegisterPlugin": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			req := &api.RegisterPluginRequest{}
			if err := unmarshal(req); err != nil {
				return nil, err
			}
			if !idxRe.MatchString(req.PluginIdx) {
				return nil, fmt.Errorf("invalid plugin index %q, must be 2 digits", req.PluginIdx)
			}
			if req.PluginName == "" || (p.rt.cfg.Version.StrictNames() && !nameRe.MatchString(req.PluginName)) {
				return nil, fmt.Errorf("invalid plugin name %q", req.PluginName)
			}
			registered := false
			p.regOnce.Do(func() {
				registered = true
				p.regC <- req
			})
			if !registered {
				return nil, errors.New("plugin already registered")
			}
			return &api.Empty{}, nil
		},
		"UpdateContainers": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			req := &api.UpdateContainersRequest{}
			if err := unmarshal(req); err != nil {
				return nil, err
			}
			return p.rt.updateFromPlugin(p, req)
		},
	}
}

// serve runs one plugin connection from accept (or launch) to close.
func (rt *Runtime) servePlugin(conn net.Conn, seq int, launched *launchedPlugin) {
	p := &plugin{rt: rt, seq: seq, mux: mux.NewWithOptions(conn, rt.cfg.Version.MuxOptions()),
		regC: make(chan *api.RegisterPluginRequest, 1), unimpl: map[api.Event]bool{}, launched: launched}
	if launched != nil {
		p.name, p.idx = launched.name, launched.idx
	}
	c1, _ := p.mux.Open(mux.PluginServiceConn)
	c2, _ := p.mux.Open(mux.RuntimeServiceConn)
	srv, err := ttrpc.NewServer()
	if err != nil {
		rt.log.Log("plugin-closed", Fields{"plugin": p.label(), "reason": err})
		_ = conn.Close()
		return
	}
	p.server = srv
	p.server.Register(runtimeService, p.runtimeMethods())
	go func() { _ = p.server.Serve(context.Background(), mux.NewListener(c2)) }()
	p.client = ttrpc.NewClient(c1)
	rt.log.Log("plugin-connected", Fields{"plugin": p.label()})

	if !rt.addConnecting(p) {
		p.close("runtime shutting down")
		return
	}
	defer rt.removePlugin(p)

	select {
	case req := <-p.regC:
		// A launched plugin keeps the name and index the runtime gave it (brief §1.4).
		if launched == nil {
			p.name, p.idx = req.PluginName, req.PluginIdx
		}
		rt.log.Log("plugin-registered", Fields{"plugin": p.label(), "name": p.name, "index": p.idx,
			"nri_version": req.NRIVersion, "launched": launched != nil,
			"registered_as": req.PluginIdx + "-" + req.PluginName})
	case <-time.After(rt.cfg.RegistrationTimeout):
		p.close("plugin registration timed out")
	case <-p.mux.Done():
		p.close(fmt.Sprintf("connection closed before registration: %v", p.mux.Err()))
	}

	if p.closeReason == "" {
		if err := p.configure(); err != nil {
			p.close(fmt.Sprintf("configure: %v", err))
		} else if err := rt.synchronize(p); err != nil {
			p.close(fmt.Sprintf("synchronize: %v", err))
		}
	}
	<-p.mux.Done()
	p.close(fmt.Sprintf("connection closed: %v", p.mux.Err()))
}

func (p *plugin) configure() error {
	rt := p.rt
	req := &api.ConfigureRequest{RuntimeName: rt.cfg.RuntimeName, RuntimeVersion: rt.cfg.RuntimeVersion,
		NRIVersion: rt.cfg.Version.NRIVersion()}
	if rt.cfg.Version.ConfigureTimeouts() {
		req.RegistrationTimeout = rt.cfg.RegistrationTimeout.Milliseconds()
		req.RequestTimeout = rt.cfg.RequestTimeout.Milliseconds()
	}
	if p.launched != nil {
		req.Config = p.launched.config // external plugins always get ""
	}
	resp := &api.ConfigureResponse{}
	ctx, cancel := p.requestCtx()
	defer cancel()
	if err := p.call(ctx, "Configure", req, resp); err != nil {
		return err
	}
	valid := rt.cfg.Version.ValidMask()
	ev := resp.Events
	if ev == 0 {
		rt.log.Log("configure-mask-zero", Fields{"plugin": p.label(),
			"note": "events = 0 subscribes to all valid events (upstream behaviour)"})
		ev = valid
	}
	if ev&^valid != 0 {
		return fmt.Errorf("invalid plugin events 0x%x (valid 0x%x)", resp.Events, valid)
	}
	p.events = ev
	rt.log.Log("plugin-configured", Fields{"plugin": p.label(), "events": fmt.Sprintf("0x%x", ev),
		"requested": fmt.Sprintf("0x%x", resp.Events)})
	return nil
}

// dedicatedRPC maps the events that v0.12 sends with their own RPC.
var dedicatedRPC = map[api.Event]string{
	api.Event_RUN_POD_SANDBOX: "RunPodSandbox", api.Event_STOP_POD_SANDBOX: "StopPodSandbox",
	api.Event_REMOVE_POD_SANDBOX: "RemovePodSandbox", api.Event_POST_CREATE_CONTAINER: "PostCreateContainer",
	api.Event_START_CONTAINER: "StartContainer", api.Event_POST_START_CONTAINER: "PostStartContainer",
	api.Event_POST_UPDATE_CONTAINER: "PostUpdateContainer", api.Event_REMOVE_CONTAINER: "RemoveContainer",
}

// stateEvent relays a pod event or container post-event: StateChange on v0.8, the dedicated
// RPC on v0.12 with the StateChange fallback on UNIMPLEMENTED.
func (p *plugin) stateEvent(e api.Event, pd *api.PodSandbox, ctr *api.Container) error {
	if !p.subscribed(e) {
		return nil
	}
	ctx, cancel := p.requestCtx()
	defer cancel()
	if method, ok := dedicatedRPC[e]; ok && p.rt.cfg.Version.DedicatedRPCs() && !p.unimpl[e] {
		var req interface{}
		if ctr == nil {
			req = &api.PodSandboxRequest{Pod: pd}
		} else {
			req = &api.ContainerEventRequest{Pod: pd, Container: ctr}
		}
		err := p.call(ctx, method, req, &api.Empty{})
		if status.Code(err) != codes.Unimplemented {
			return err
		}
		p.unimpl[e] = true
		p.rt.log.Log("statechange-fallback", Fields{"plugin": p.label(), "rpc": method})
	}
	return p.call(ctx, "StateChange", &api.StateChangeEvent{Event: e, Pod: pd, Container: ctr}, &api.Empty{})
}

// synchronize sends all pods and containers (chunked) and applies the plugin's updates. It
// holds the NRI lock, as containerd does, so no event interleaves with it.
func (rt *Runtime) synchronize(p *plugin) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if p.closeReason != "" {
		return errors.New(p.closeReason)
	}
	pods, ctrs := rt.snapshot()
	total := len(pods) + len(ctrs)
	perMsg := rt.cfg.SyncMaxObjects
	if perMsg <= 0 || perMsg > total || !rt.cfg.Version.ChunkedSync() {
		// <= v0.6.1: one message whatever its size (old ttrpc sends > 4 MiB anyway).
		perMsg = total
	}
	// NRI >= v0.7 shrinks the chunk while a message would exceed the ttrpc limit.
	for rt.cfg.Version.ChunkedSync() && perMsg > minSyncObjects {
		if size := maxChunkSize(pods, ctrs, perMsg); size <= maxSyncMsg {
			break
		}
		perMsg = perMsg * 9 / 10
	}
	ctx, cancel := p.requestCtx()
	defer cancel()
	start := time.Now()
	pi, ci, msgs := 0, 0, 0
	var updates []*api.ContainerUpdate
	for {
		req := &api.SynchronizeRequest{}
		n := 0
		for ; pi < len(pods) && n < perMsg; pi, n = pi+1, n+1 {
			req.Pods = append(req.Pods, pods[pi])
		}
		for ; ci < len(ctrs) && n < perMsg; ci, n = ci+1, n+1 {
			req.Containers = append(req.Containers, ctrs[ci])
		}
		req.More = pi < len(pods) || ci < len(ctrs)
		resp := &api.SynchronizeResponse{}
		msgs++
		if err := p.call(ctx, "Synchronize", req, resp); err != nil {
			return err
		}
		if req.More {
			if !resp.More || len(resp.Update) != 0 {
				return errors.New("plugin does not handle split sync requests")
			}
			continue
		}
		if resp.More {
			return errors.New("plugin replied more=true to the last sync message")
		}
		updates = resp.Update
		break
	}
	failed := rt.applyUpdates(updates, "sync", p.label())
	p.synced = true
	rt.log.Log("plugin-synchronized", Fields{"plugin": p.label(), "pods": len(pods),
		"containers": len(ctrs), "messages": msgs, "updates": len(updates), "failed": len(failed),
		"us": time.Since(start).Microseconds()})
	rt.activate(p)
	return nil
}

func maxChunkSize(pods []*api.PodSandbox, ctrs []*api.Container, perMsg int) int {
	best, cur, n := 0, 0, 0
	for _, pd := range pods {
		cur += pd.Size() + 6
		n++
		if n == perMsg {
			if cur > best {
				best = cur
			}
			cur, n = 0, 0
		}
	}
	for _, c := range ctrs {
		cur += c.Size() + 6
		n++
		if n == perMsg {
			if cur > best {
				best = cur
			}
			cur, n = 0, 0
		}
	}
	if cur > best {
		best = cur
	}
	return best
}
