// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Fields are the payload of one event-log line.
type Fields map[string]interface{}

// EventLog writes JSON lines: {"time":..., "ts_ns":..., "event":..., fields...}.
type EventLog struct {
	mu sync.Mutex
	w  io.Writer
}

// NewEventLog logs to w.
func NewEventLog(w io.Writer) *EventLog { return &EventLog{w: w} }

// Log writes one line. Field names time, ts_ns and event are reserved.
func (l *EventLog) Log(event string, f Fields) {
	if l == nil || l.w == nil {
		return
	}
	now := time.Now()
	line := make(map[string]interface{}, len(f)+3)
	for k, v := range f {
		if err, ok := v.(error); ok {
			v = err.Error()
		}
		line[k] = v
	}
	line["time"] = now.Format(time.RFC3339Nano)
	line["ts_ns"] = now.UnixNano()
	line["event"] = event
	b, err := json.Marshal(line)
	if err != nil {
		b, _ = json.Marshal(map[string]interface{}{"event": "log-error", "error": err.Error()})
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(b)
}
