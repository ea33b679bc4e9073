// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"bytes"
	"encoding/binary"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
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
