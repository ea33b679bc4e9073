// SPDX-License-Identifier: Apache-2.0

// rttbench measures the unary round trip of Debian's Go ttrpc: client → server over a Unix
// socket in one process, with a payload of -size bytes each way. Pin it with taskset to compare
// with the C++ pair. Prints one line:
//
//	go-rtt: p50_us=<median> p99_us=<p99> n=<calls> size=<bytes> switches_per_call=<thread switches>
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/containerd/ttrpc"
	"github.com/sirupsen/logrus"

	api "colod/nriapi"
)

func main() {
	n := flag.Int("n", 20000, "measured calls")
	warmup := flag.Int("warmup", 2000, "unmeasured calls first")
	size := flag.Int("size", 4096, "payload bytes per direction")
	flag.Parse()
	logrus.SetOutput(os.Stderr)
	if *n <= 0 || *size < 0 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "rttbench: -n must be > 0, -size and -warmup >= 0")
		os.Exit(3)
	}
	dir, err := os.MkdirTemp("", "rttbench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rttbench:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "rtt.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rttbench:", err)
		os.Exit(1)
	}
	srv, err := ttrpc.NewServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rttbench:", err)
		os.Exit(1)
	}
	reply := &api.ConfigureRequest{Config: string(make([]byte, *size))}
	srv.Register("colod.bench.Echo", map[string]ttrpc.Method{
		"Echo": func(ctx context.Context, unmarshal func(interface{}) error) (interface{}, error) {
			req := &api.ConfigureRequest{}
			if err := unmarshal(req); err != nil {
				return nil, err
			}
			return reply, nil
		},
	})
	go func() { _ = srv.Serve(context.Background(), l) }()
	conn, err := net.Dial("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rttbench:", err)
		os.Exit(1)
	}
	client := ttrpc.NewClient(conn)
	req := &api.ConfigureRequest{Config: string(make([]byte, *size))}
	ctx := context.Background()
	samples := make([]time.Duration, 0, *n)
	var switches int64
	for i := 0; i < *warmup+*n; i++ {
		if i == *warmup {
			switches = contextSwitches()
		}
		resp := &api.ConfigureRequest{}
		start := time.Now()
		if err := client.Call(ctx, "colod.bench.Echo", "Echo", req, resp); err != nil {
			fmt.Fprintln(os.Stderr, "rttbench: call:", err)
			os.Exit(1)
		}
		d := time.Since(start)
		if len(resp.Config) != *size {
			fmt.Fprintln(os.Stderr, "rttbench: short reply")
			os.Exit(1)
		}
		if i >= *warmup {
			samples = append(samples, d)
		}
	}
	switches = contextSwitches() - switches
	_ = client.Close()
	_ = srv.Close()
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	fmt.Printf("go-rtt: p50_us=%.1f p99_us=%.1f n=%d size=%d switches_per_call=%.2f\n",
		us(samples[len(samples)/2]), us(samples[len(samples)*99/100]), len(samples), *size,
		float64(switches)/float64(len(samples)))
}

// contextSwitches is this process's thread switches so far (voluntary and not): Go's pair on
// one CPU switches goroutines in user space, which the C++ pair's two threads cannot.
func contextSwitches() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}
