// SPDX-License-Identifier: Apache-2.0

package mux

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

func frame(id uint32, payload []byte) []byte {
	b := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint32(b[0:4], id)
	binary.BigEndian.PutUint32(b[4:8], uint32(len(payload)))
	copy(b[8:], payload)
	return b
}

func pair(t *testing.T) (*Mux, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	m := New(a)
	t.Cleanup(func() { m.Close(); b.Close() })
	return m, b
}

func waitDone(t *testing.T, m *Mux) error {
	t.Helper()
	select {
	case <-m.Done():
		return m.Err()
	case <-time.After(5 * time.Second):
		t.Fatal("mux did not close")
		return nil
	}
}

func TestReadsOneWholeFramePerRead(t *testing.T) {
	m, raw := pair(t)
	c, _ := m.Open(PluginServiceConn)
	go func() {
		raw.Write(frame(1, []byte("hello")))
		raw.Write(frame(1, []byte("world!")))
	}()
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("first read = %q, %v", buf[:n], err)
	}
	n, err = c.Read(buf)
	if err != nil || string(buf[:n]) != "world!" {
		t.Fatalf("second read = %q, %v", buf[:n], err)
	}
}

func TestFrameLargerThanReaderBufferIsConnectionError(t *testing.T) {
	m, raw := pair(t)
	c, _ := m.Open(RuntimeServiceConn)
	go raw.Write(frame(2, make([]byte, 6130))) // the §1.5 reproducer size
	_, err := c.Read(make([]byte, 4096))
	if !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("read err = %v, want ENOMEM", err)
	}
	if err := waitDone(t, m); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("mux err = %v, want ErrFrameTooLarge", err)
	}
}

func TestGoWriterPatternIsAccepted(t *testing.T) {
	// 4096-byte frame then one frame with the rest, read through a 4096 buffer then a big one.
	m, raw := pair(t)
	c, _ := m.Open(RuntimeServiceConn)
	go func() {
		raw.Write(frame(2, make([]byte, 4096)))
		raw.Write(frame(2, make([]byte, 60000)))
	}()
	if n, err := c.Read(make([]byte, 4096)); err != nil || n != 4096 {
		t.Fatalf("first = %d, %v", n, err)
	}
	if n, err := c.Read(make([]byte, 60000)); err != nil || n != 60000 {
		t.Fatalf("second = %d, %v", n, err)
	}
}

func TestUnknownConnIsDroppedAndOthersFlow(t *testing.T) {
	m, raw := pair(t)
	c, _ := m.Open(PluginServiceConn)
	go func() {
		raw.Write(frame(7, []byte("nobody")))
		raw.Write(frame(1, []byte("ok")))
	}()
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "ok" {
		t.Fatalf("read = %q, %v", buf[:n], err)
	}
}

func TestHugeAndZeroLengthFramesCloseTheTrunk(t *testing.T) {
	for _, n := range []uint32{MaxPayload + 1, 0xFFFFFFFF, 0} {
		m, raw := pair(t)
		var hdr [8]byte
		binary.BigEndian.PutUint32(hdr[0:4], 1)
		binary.BigEndian.PutUint32(hdr[4:8], n)
		go raw.Write(hdr[:])
		if err := waitDone(t, m); err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("length %d: err = %v, want a framing error", n, err)
		}
	}
}

func TestPeerClosingMidFrame(t *testing.T) {
	m, raw := pair(t)
	go func() {
		raw.Write(frame(1, make([]byte, 100))[:50])
		raw.Close()
	}()
	if err := waitDone(t, m); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want mid-frame error", err)
	}
}

func TestWriteProducesFramesAndQueueOverflowCloses(t *testing.T) {
	m, raw := pair(t)
	c, _ := m.Open(PluginServiceConn)
	go c.Write([]byte("abc"))
	var hdr [8]byte
	if _, err := io.ReadFull(raw, hdr[:]); err != nil {
		t.Fatal(err)
	}
	if id, n := binary.BigEndian.Uint32(hdr[0:4]), binary.BigEndian.Uint32(hdr[4:8]); id != 1 || n != 3 {
		t.Fatalf("header = %d/%d", id, n)
	}
	body := make([]byte, 3)
	io.ReadFull(raw, body)
	if string(body) != "abc" {
		t.Fatalf("body %q", body)
	}
	// Nobody reads conn 1: the 257th frame overflows its queue.
	go func() {
		for i := 0; i <= ReadQueueLen; i++ {
			if _, err := raw.Write(frame(1, []byte("x"))); err != nil {
				return
			}
		}
	}()
	if err := waitDone(t, m); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want queue overflow", err)
	}
}
