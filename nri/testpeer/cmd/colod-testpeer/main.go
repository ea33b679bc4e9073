// SPDX-License-Identifier: Apache-2.0

// colod-testpeer is the runtime-side NRI peer and node simulator (see ../../README.md).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"colod/testpeer/cgroup"
	"colod/testpeer/peer"
	"colod/testpeer/scenario"
)

const exitConfig = 3

func fatalConfig(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "colod-testpeer: "+format+"\n", a...)
	os.Exit(exitConfig)
}

func main() {
	var (
		socket        = flag.String("socket", "", "NRI socket to listen on (required)")
		version       = flag.String("nri-version", "v0.12", "emulated NRI level: v0.6, v0.8, v0.11 or v0.12")
		rtName        = flag.String("runtime-name", "containerd", "ConfigureRequest.runtime_name")
		rtVersion     = flag.String("runtime-version", "", "ConfigureRequest.runtime_version (default: a containerd release of the level)")
		pluginDir     = flag.String("plugin-dir", "", "start the pre-installed plugins NN-name found here (like containerd's plugin_path)")
		pluginCfgDir  = flag.String("plugin-config-dir", "", "their NN-name.conf / name.conf (like plugin_config_path)")
		pluginErr     = flag.String("plugin-stderr", "", "append launched plugins' stderr to this file (default /dev/null, as upstream)")
		regTimeout    = flag.Duration("registration-timeout", 5*time.Second, "accept → RegisterPlugin deadline")
		reqTimeout    = flag.Duration("request-timeout", 2*time.Second, "deadline of every runtime→plugin call")
		syncMax       = flag.Int("sync-max-objects", 0, "max pods+containers per Synchronize message (0: one message unless > 4 MiB)")
		cgRoot        = flag.String("cgroup-root", "/sys/fs/cgroup", "cgroup mount root")
		cgParent      = flag.String("cgroup-parent", "", "private prefix dir under every hierarchy (default colod-testpeer-<pid>)")
		cgDriver      = flag.String("cgroup-driver", "cgroupfs", "kubelet cgroup naming: cgroupfs or systemd")
		scenarioPath  = flag.String("scenario", "", "JSON scenario file")
		control       = flag.String("control", "", "control socket path (JSON lines)")
		logPath       = flag.String("log", "-", "JSON-lines event log file (- = stdout)")
		restartAfter  = flag.Duration("restart-after", 0, "restart the runtime every DUR (0 = never)")
		restartCount  = flag.Int("restart-count", 0, "stop restarting after N restarts (0 = unlimited)")
		restartDelay  = flag.Duration("restart-delay", 200*time.Millisecond, "downtime of a restart")
		restartSynced = flag.Bool("restart-when-synced", false,
			"count --restart-after from the moment a plugin is synchronized with the current incarnation (at most 30s of waiting), so every restart cuts a live session")
		synthPods = flag.Int("synth-pods", 0, "synthetic (fake) pods")
		synthCtrs = flag.Int("synth-containers", 0, "synthetic (fake) containers, spread over the synthetic pods")
		synthCgs  = flag.String("synth-cgroups", "", "PREFIX: the i-th synthetic container (from 1) reports the cgroups path PREFIX<i>, cgroups someone else made and populated (the peer never writes them)")
		synthBe   = flag.Int("synth-besteffort-every", 0, "every K-th synthetic pod is BestEffort (0: all Burstable)")
		exitAfter = flag.Bool("exit-after-scenario", false, "exit when the timeline is done")
	)
	flag.Parse()
	if flag.NArg() != 0 {
		fatalConfig("unexpected arguments %v", flag.Args())
	}
	if *socket == "" {
		fatalConfig("--socket is required")
	}
	v, err := peer.ParseVersion(*version)
	if err != nil {
		fatalConfig("--nri-version: %v", err)
	}
	if *rtVersion == "" {
		*rtVersion = v.DefaultRuntimeVersion()
	}
	var pluginStderr *os.File
	if *pluginErr != "" {
		if pluginStderr, err = os.OpenFile(*pluginErr, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
			fatalConfig("opening --plugin-stderr: %v", err)
		}
		defer pluginStderr.Close()
	}
	if *cgDriver != "cgroupfs" && *cgDriver != "systemd" {
		fatalConfig("--cgroup-driver %q: want cgroupfs or systemd", *cgDriver)
	}
	if *reqTimeout <= 0 || *regTimeout <= 0 || *syncMax < 0 || *synthPods < 0 || *synthCtrs < 0 {
		fatalConfig("timeouts must be > 0 and counts >= 0")
	}
	if *cgParent == "" {
		*cgParent = fmt.Sprintf("colod-testpeer-%d", os.Getpid())
	}
	// ttrpc logs through logrus; keep its chatter off stdout (where the event log may go).
	logrus.SetOutput(os.Stderr)

	var out io.Writer = os.Stdout
	if *logPath != "-" {
		f, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fatalConfig("opening log: %v", err)
		}
		defer f.Close()
		out = f
	}
	elog := peer.NewEventLog(out)

	var sc *scenario.Scenario
	if *scenarioPath != "" {
		var err error
		if sc, err = scenario.Load(*scenarioPath); err != nil {
			fatalConfig("%v", err)
		}
	}
	needCgroups := *control != ""
	if sc != nil {
		for _, c := range sc.Containers {
			needCgroups = needCgroups || !c.Fake
		}
	}
	var cg *cgroup.Manager
	if needCgroups {
		var err error
		cg, err = cgroup.New(cgroup.Options{Root: *cgRoot, Log: func(ch cgroup.Change) {
			f := peer.Fields{"container": ch.Container, "file": ch.File, "source": ch.Source}
			if ch.Err != nil {
				f["value"], f["error"], f["old"] = ch.Value, ch.Err.Error(), ch.Old
				elog.Log("cgroup-write-failed", f)
				return
			}
			f["old"], f["new"], f["value"] = ch.Old, ch.New, ch.Value
			elog.Log("cgroup-write", f)
		}})
		if err != nil {
			fatalConfig("cgroups: %v", err)
		}
		elog.Log("cgroups", peer.Fields{"mode": cg.Mode().String(), "root": *cgRoot, "parent": *cgParent})
	}

	rt := peer.New(peer.Config{SocketPath: *socket, Version: v, RuntimeName: *rtName,
		RuntimeVersion: *rtVersion, RegistrationTimeout: *regTimeout, RequestTimeout: *reqTimeout,
		SyncMaxObjects: *syncMax, CgroupParent: *cgParent, CgroupDriver: *cgDriver,
		PluginDir: *pluginDir, PluginConfigDir: *pluginCfgDir, PluginStderr: pluginStderr}, elog, cg)

	if sc != nil {
		for _, p := range sc.Pods {
			if err := rt.AddPod(p); err != nil {
				fatalConfig("%v", err)
			}
		}
		for _, c := range sc.Containers {
			if err := rt.AddContainer(c); err != nil {
				fatalConfig("%v", err)
			}
		}
	}
	if err := rt.SynthesizeWith(peer.SynthOptions{Pods: *synthPods, Containers: *synthCtrs,
		CgroupPrefix: *synthCgs, BestEffortEvery: *synthBe}); err != nil {
		fatalConfig("%v", err)
	}
	if err := rt.Listen(); err != nil {
		fmt.Fprintf(os.Stderr, "colod-testpeer: %v\n", err)
		_ = rt.Shutdown()
		os.Exit(1)
	}

	done := make(chan int, 4)
	var exitOnce sync.Once
	exit := func(code int) { exitOnce.Do(func() { done <- code }) }

	var ctl *peer.Control
	if *control != "" {
		var err error
		ctl, err = peer.ServeControl(rt, *control, func() { exit(0) })
		if err != nil {
			fmt.Fprintf(os.Stderr, "colod-testpeer: control socket: %v\n", err)
			_ = rt.Shutdown()
			os.Exit(1)
		}
		elog.Log("control-listening", peer.Fields{"socket": *control})
	}
	if *restartAfter > 0 {
		go func() {
			for n := 0; *restartCount == 0 || n < *restartCount; n++ {
				if *restartSynced {
					// Bounded polling: a plugin that never comes back must not stall the scenario.
					for deadline := time.Now().Add(30 * time.Second); len(rt.Plugins()) == 0 && time.Now().Before(deadline); {
						time.Sleep(5 * time.Millisecond)
					}
				}
				time.Sleep(*restartAfter)
				if err := rt.Restart(*restartDelay); err != nil {
					elog.Log("restart-failed", peer.Fields{"error": err.Error()})
					exit(1)
					return
				}
			}
		}()
	}
	if sc != nil {
		go func() {
			start := time.Now()
			for _, st := range sc.Timeline {
				if d := time.Until(start.Add(time.Duration(st.AtMs) * time.Millisecond)); d > 0 {
					time.Sleep(d)
				}
				if st.Op == "exit" {
					exit(0)
					return
				}
				_, err := rt.Do(st)
				f := peer.Fields{"op": st.Op, "pod": st.Pod, "container": st.Container, "at_ms": st.AtMs}
				if err != nil {
					f["error"] = err.Error()
					elog.Log("step-failed", f)
				} else {
					elog.Log("step-done", f)
				}
			}
			elog.Log("scenario-done", nil)
			if *exitAfter {
				exit(0)
			}
		}()
	}

	sigC := make(chan os.Signal, 2)
	signal.Notify(sigC, syscall.SIGINT, syscall.SIGTERM)
	code := 0
	select {
	case s := <-sigC:
		elog.Log("signal", peer.Fields{"signal": s.String()})
	case code = <-done:
	}
	if ctl != nil {
		ctl.Close()
	}
	if err := rt.Shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "colod-testpeer: cleanup: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
