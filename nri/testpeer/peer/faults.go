// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "colod/nriapi"
)

// updateFailedMsg is containerd's status message when an UpdateContainers call fails.
const updateFailedMsg = "NRI update of some containers failed"

// faults are the pending injected failures of plugin → runtime UpdateContainers calls. They
// have their own lock so the control ops that arm them return at once, without waiting for the
// NRI lock an event relay may hold for a whole request timeout.
type faults struct {
	mu         sync.Mutex
	refuseLeft int
	refuseMsg  string
	loseLeft   int
	// loseAway: how long the runtime stays away after each lost reply (0: the plugin may
	// reconnect at once). A reply lost to a runtime crash is followed by an outage, and
	// whatever happens to the container meanwhile (a kubelet resize) is news to the plugin.
	loseAway time.Duration
}

// RefuseUpdates makes the next n UpdateContainers calls (from any plugin) fail the way
// containerd answers a failed update, applying nothing. msg "" is containerd's message. It
// replaces what was pending; n = 0 cancels.
func (rt *Runtime) RefuseUpdates(n int, msg string) {
	if msg == "" {
		msg = updateFailedMsg
	}
	rt.faults.mu.Lock()
	rt.faults.refuseLeft, rt.faults.refuseMsg = n, msg
	rt.faults.mu.Unlock()
	rt.log.Log("fault-armed", Fields{"fault": "refuse_updates", "count": n, "message": msg})
}

// LoseReplies makes the next n UpdateContainers calls apply normally and then close the
// plugin's connection before the reply goes out; with away > 0 the runtime then goes down for
// that long (an outage that starts with the lost reply, so the plugin cannot reconnect in
// between). It replaces what was pending; n = 0 cancels.
func (rt *Runtime) LoseReplies(n int, away time.Duration) {
	rt.faults.mu.Lock()
	rt.faults.loseLeft, rt.faults.loseAway = n, away
	rt.faults.mu.Unlock()
	rt.log.Log("fault-armed", Fields{"fault": "lose_replies", "count": n,
		"away_ms": away.Milliseconds()})
}

// refuseUpdate takes one pending refusal, if any, and returns the error status to reply with
// (must hold mu, so refusals hit calls in the order they are served).
func (rt *Runtime) refuseUpdate(p *plugin, req *api.UpdateContainersRequest) error {
	f := &rt.faults
	f.mu.Lock()
	if f.refuseLeft == 0 {
		f.mu.Unlock()
		return nil
	}
	f.refuseLeft--
	left, msg := f.refuseLeft, f.refuseMsg
	f.mu.Unlock()
	rt.log.Log("update-refused", Fields{"plugin": p.label(), "count": len(req.Update),
		"remaining": left, "message": msg})
	return status.Error(codes.Unknown, msg)
}

// loseReply takes one pending lost reply, if any, and closes the plugin's connection (must
// hold mu). Called from inside the UpdateContainers handler after the updates were applied:
// the trunk is closed before the handler returns, so the ttrpc server can no longer send the
// reply and the plugin sees its connection drop mid-call.
func (rt *Runtime) loseReply(p *plugin) {
	f := &rt.faults
	f.mu.Lock()
	if f.loseLeft == 0 {
		f.mu.Unlock()
		return
	}
	f.loseLeft--
	left, away := f.loseLeft, f.loseAway
	f.mu.Unlock()
	rt.log.Log("update-reply-lost", Fields{"plugin": p.label(), "remaining": left,
		"away_ms": away.Milliseconds()})
	if away > 0 {
		// Down before the connection closes: the listener is gone by the time the plugin
		// sees the drop. goDown takes no NRI lock (mu, held here).
		if err := rt.Outage(away); err != nil {
			rt.log.Log("fault-error", Fields{"fault": "lose_replies", "error": err.Error()})
		}
	}
	p.close("update reply lost (fault injection)")
}

// Outage takes the runtime away for d like Restart (listener and plugins closed, socket
// removed, same pods and containers when it comes back) but returns as soon as it is down; the
// rest runs in the background and ends with an outage-end event. It fails while an outage or a
// restart is in progress rather than queueing behind it.
func (rt *Runtime) Outage(d time.Duration) error {
	if !rt.downMu.TryLock() {
		return errors.New("runtime already down (an outage or restart is in progress)")
	}
	if err := rt.goDown(d, true); err != nil {
		rt.downMu.Unlock()
		return err
	}
	start := time.Now()
	go func() {
		defer rt.downMu.Unlock()
		time.Sleep(d)
		err := rt.Listen()
		rt.log.Log("outage-end", Fields{"ms": d.Milliseconds(),
			"down_ms": time.Since(start).Milliseconds(), "error": errString(err)})
	}()
	return nil
}
