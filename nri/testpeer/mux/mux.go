// SPDX-License-Identifier: Apache-2.0

// Package mux is the test peer's NRI multiplexer: 8-byte big-endian frames {conn id, length}
// over one Unix socket (the "trunk"), each logical connection an ordered byte stream.
//
// It reads the way the runtime's (containerd/nri pkg/net/multiplex) does, on purpose:
//   - one reader goroutine; each logical connection has a queue of whole frames (256 deep);
//     overflowing any queue is a trunk error;
//   - Read(buf) hands over exactly one frame and fails with ENOMEM when the frame does not fit
//     in buf. Go's ttrpc reads through a 4096-byte bufio.Reader, so a plugin that sends a frame
//     larger than the buffer the reader happens to pass breaks the connection (protocol brief
//     §1.5). Upstream then leaves a dead ttrpc receive loop behind; we make it a connection error
//     (the trunk is closed and the violation recorded in Err()), so tests see it at once.
//   - frames for connection ids nobody opened are dropped.
//
// Unlike upstream, a frame longer than MaxPayload (4 MiB + 10) is refused before allocating
// (bounded memory), and zero-length frames are recorded as a violation too.
package mux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// ConnID identifies a logical connection. 0 is reserved.
type ConnID uint32

const (
	// PluginServiceConn carries the plugin's ttrpc server (runtime is the client).
	PluginServiceConn ConnID = 1
	// RuntimeServiceConn carries the runtime's ttrpc server (plugin is the client).
	RuntimeServiceConn ConnID = 2

	headerLen = 8
	// MaxPayload is the largest frame payload accepted or sent: ttrpc header + 4 MiB.
	MaxPayload = 10 + 4<<20
	// LegacyMaxPayload is NRI <= v0.6.1's maxPayloadSize (1 << 24): frames up to 16 MiB, and a
	// larger write fails with EMSGSIZE instead of being split (brief §1.2).
	LegacyMaxPayload = 1 << 24
	// ReadQueueLen is the per-connection queue depth, as upstream.
	ReadQueueLen = 256
)

// Options are the frame limits of one NRI level.
type Options struct {
	// MaxPayload bounds every frame read or written.
	MaxPayload int
	// Split: a write longer than MaxPayload is sent as several frames (NRI >= v0.7); without it
	// the write fails with EMSGSIZE and nothing is sent (<= v0.6.1).
	Split bool
}

// DefaultOptions are NRI >= v0.7's limits.
var DefaultOptions = Options{MaxPayload: MaxPayload, Split: true}

// ErrFrameTooLarge is the §1.5 violation: a frame larger than the reader's buffer.
var ErrFrameTooLarge = errors.New("mux: frame larger than the reader's buffer (frame rule §1.5)")

// Mux multiplexes logical connections over one trunk.
type Mux struct {
	opts      Options
	trunk     net.Conn
	writeLock sync.Mutex

	connLock sync.Mutex
	conns    map[ConnID]*Conn

	errOnce   sync.Once
	err       error
	closeOnce sync.Once
	doneC     chan struct{}

	framesIn  uint64
	framesOut uint64
	statsLock sync.Mutex
}

// New starts the reader over trunk with NRI >= v0.7's limits.
func New(trunk net.Conn) *Mux { return NewWithOptions(trunk, DefaultOptions) }

// NewWithOptions starts the reader over trunk with the given limits.
func NewWithOptions(trunk net.Conn, opts Options) *Mux {
	if opts.MaxPayload <= 0 {
		opts = DefaultOptions
	}
	m := &Mux{opts: opts, trunk: trunk, conns: map[ConnID]*Conn{}, doneC: make(chan struct{})}
	go m.reader()
	return m
}

// Open returns the logical connection id (creating its queue).
func (m *Mux) Open(id ConnID) (*Conn, error) {
	if id == 0 {
		return nil, errors.New("mux: conn id 0 is reserved")
	}
	m.connLock.Lock()
	defer m.connLock.Unlock()
	c, ok := m.conns[id]
	if !ok {
		c = &Conn{id: id, mux: m, readC: make(chan []byte, ReadQueueLen), doneC: make(chan struct{})}
		m.conns[id] = c
	}
	return c, nil
}

// Done is closed when the trunk is closed.
func (m *Mux) Done() <-chan struct{} { return m.doneC }

// Err is the reason the trunk closed (io.EOF for an orderly close by the peer), nil while open.
func (m *Mux) Err() error {
	select {
	case <-m.doneC:
	default:
		return nil
	}
	m.errOnce.Do(func() { m.err = io.EOF })
	return m.err
}

// Stats returns the frame counters.
func (m *Mux) Stats() (in, out uint64) {
	m.statsLock.Lock()
	defer m.statsLock.Unlock()
	return m.framesIn, m.framesOut
}

func (m *Mux) setError(err error) { m.errOnce.Do(func() { m.err = err }) }

// Fail records err as the reason and closes the trunk.
func (m *Mux) Fail(err error) {
	m.setError(err)
	_ = m.Close()
}

// Close closes the trunk and every logical connection.
func (m *Mux) Close() error {
	m.closeOnce.Do(func() {
		m.connLock.Lock()
		for _, c := range m.conns {
			c.closeLocal()
		}
		m.connLock.Unlock()
		close(m.doneC)
		_ = m.trunk.Close()
	})
	return nil
}

func (m *Mux) write(id ConnID, b []byte) (int, error) {
	if !m.opts.Split && len(b) > m.opts.MaxPayload {
		// Upstream <= v0.6.1: the write fails, the trunk stays up.
		return 0, fmt.Errorf("mux: %d-byte write exceeds the %d-byte frame limit: %w", len(b),
			m.opts.MaxPayload, syscall.EMSGSIZE)
	}
	written := 0
	for len(b) > 0 {
		n := len(b)
		if n > m.opts.MaxPayload {
			n = m.opts.MaxPayload
		}
		var hdr [headerLen]byte
		binary.BigEndian.PutUint32(hdr[0:4], uint32(id))
		binary.BigEndian.PutUint32(hdr[4:8], uint32(n))
		m.writeLock.Lock()
		_, err := m.trunk.Write(hdr[:])
		if err == nil {
			_, err = m.trunk.Write(b[:n])
		}
		m.writeLock.Unlock()
		if err != nil {
			m.Fail(fmt.Errorf("mux: writing to trunk: %w", err))
			return written, err
		}
		m.statsLock.Lock()
		m.framesOut++
		m.statsLock.Unlock()
		written += n
		b = b[n:]
	}
	return written, nil
}

func closedErr(err error) error {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("mux: peer closed mid-frame: %w", err)
	default:
		return err
	}
}

func (m *Mux) reader() {
	var hdr [headerLen]byte
	for {
		if _, err := io.ReadFull(m.trunk, hdr[:]); err != nil {
			m.Fail(closedErr(err))
			return
		}
		id := ConnID(binary.BigEndian.Uint32(hdr[0:4]))
		n := binary.BigEndian.Uint32(hdr[4:8])
		if int64(n) > int64(m.opts.MaxPayload) {
			m.Fail(fmt.Errorf("mux: frame of %d bytes exceeds the maximum %d", n, m.opts.MaxPayload))
			return
		}
		if n == 0 {
			m.Fail(errors.New("mux: zero-length frame (frame rule §1.5)"))
			return
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(m.trunk, buf); err != nil {
			m.Fail(closedErr(err))
			return
		}
		m.statsLock.Lock()
		m.framesIn++
		m.statsLock.Unlock()
		m.connLock.Lock()
		c, ok := m.conns[id]
		m.connLock.Unlock()
		if !ok {
			continue
		}
		select {
		case c.readC <- buf:
		default:
			m.Fail(errors.New("mux: failed to queue payload for reading (queue full)"))
			return
		}
	}
}

// Conn is one logical connection; it implements net.Conn.
type Conn struct {
	id        ConnID
	mux       *Mux
	readC     chan []byte
	doneC     chan struct{}
	closeOnce sync.Once
}

// Read returns one whole frame; ENOMEM (and a closed trunk) if it does not fit in buf.
func (c *Conn) Read(buf []byte) (int, error) {
	select {
	case msg := <-c.readC:
		if len(buf) < len(msg) {
			err := fmt.Errorf("%w: %d-byte frame, %d-byte buffer on conn %d: %v", ErrFrameTooLarge,
				len(msg), len(buf), c.id, syscall.ENOMEM)
			c.mux.Fail(err)
			return 0, syscall.ENOMEM
		}
		return copy(buf, msg), nil
	case <-c.doneC:
		return 0, c.mux.Err()
	case <-c.mux.doneC:
		return 0, c.mux.Err()
	}
}

// Write sends b as one frame (split only above MaxPayload).
func (c *Conn) Write(b []byte) (int, error) {
	select {
	case <-c.doneC:
		return 0, io.EOF
	case <-c.mux.doneC:
		return 0, io.EOF
	default:
	}
	return c.mux.write(c.id, b)
}

func (c *Conn) closeLocal() { c.closeOnce.Do(func() { close(c.doneC) }) }

// Close closes this logical connection only.
func (c *Conn) Close() error {
	c.mux.connLock.Lock()
	if c.mux.conns[c.id] == c {
		delete(c.mux.conns, c.id)
	}
	c.mux.connLock.Unlock()
	c.closeLocal()
	return nil
}

type addr struct{ id ConnID }

func (a addr) Network() string { return "nri-mux" }
func (a addr) String() string  { return fmt.Sprintf("conn-%d", a.id) }

func (c *Conn) LocalAddr() net.Addr                { return addr{c.id} }
func (c *Conn) RemoteAddr() net.Addr               { return addr{c.id} }
func (c *Conn) SetDeadline(_ time.Time) error      { return nil }
func (c *Conn) SetReadDeadline(_ time.Time) error  { return nil }
func (c *Conn) SetWriteDeadline(_ time.Time) error { return nil }

// Listener hands out one connection once, then blocks until closed (for ttrpc.Server.Serve).
type Listener struct {
	conn      net.Conn
	once      sync.Once
	connC     chan net.Conn
	closeOnce sync.Once
	doneC     chan struct{}
}

// NewListener wraps conn.
func NewListener(conn net.Conn) *Listener {
	l := &Listener{conn: conn, connC: make(chan net.Conn, 1), doneC: make(chan struct{})}
	l.connC <- conn
	return l
}

// Accept returns the connection the first time, then blocks until Close.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.connC:
		return c, nil
	case <-l.doneC:
		return nil, net.ErrClosed
	}
}

// Close unblocks Accept.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.doneC) })
	return nil
}

// Addr of the wrapped connection.
func (l *Listener) Addr() net.Addr { return l.conn.LocalAddr() }
