// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"sync"

	"colod/testpeer/scenario"
)

// Control serves the control socket: one JSON step per line in, one JSON reply per line out.
// Steps from all clients run one at a time.
type Control struct {
	rt     *Runtime
	l      net.Listener
	path   string
	mu     sync.Mutex
	onExit func()
}

// ServeControl listens on path; onExit is called for the "exit" op.
func ServeControl(rt *Runtime, path string, onExit func()) (*Control, error) {
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	c := &Control{rt: rt, l: l, path: path, onExit: onExit}
	go c.accept()
	return c, nil
}

// Close stops the control socket.
func (c *Control) Close() {
	_ = c.l.Close()
	_ = os.Remove(c.path)
}

func (c *Control) accept() {
	for {
		conn, err := c.l.Accept()
		if err != nil {
			return
		}
		go c.serve(conn)
	}
}

type reply struct {
	OK     bool        `json:"ok"`
	Result interface{} `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
}

func (c *Control) serve(conn net.Conn) {
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	enc := json.NewEncoder(conn)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var st scenario.Step
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var res interface{}
		err := dec.Decode(&st)
		if err == nil {
			c.mu.Lock()
			res, err = c.rt.Do(st)
			c.mu.Unlock()
			c.rt.log.Log("control-step", Fields{"op": st.Op, "pod": st.Pod, "container": st.Container,
				"error": errString(err)})
		} else {
			err = errors.New("bad request: " + err.Error())
		}
		r := reply{OK: err == nil, Result: res}
		if err != nil {
			r.Error = err.Error()
		}
		if werr := enc.Encode(r); werr != nil {
			return
		}
		if err == nil && st.Op == "exit" && c.onExit != nil {
			c.onExit()
		}
	}
}
