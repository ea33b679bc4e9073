// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// launchedPlugin is a pre-installed plugin: an executable NN-name in the plugin dir that the
// runtime starts itself on one end of a socketpair (brief §1.4, containerd/iSulad/CRI-O alike).
type launchedPlugin struct {
	name, idx, path, config string
	cmd                     *exec.Cmd
	exited                  chan struct{}
}

// discoverPlugins lists dir as upstream discoverPlugins does: every non-directory entry with an
// execute bit must be named NN-name (two ASCII digits, split at the first '-'), else discovery
// fails (and with it the runtime's start). Entries come in name order.
func discoverPlugins(dir, cfgDir string) ([]*launchedPlugin, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil // upstream: a missing plugin dir is no error
		}
		return nil, fmt.Errorf("discovering plugins in %s: %w", dir, err)
	}
	var out []*launchedPlugin
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("discovering plugins: %w", err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			continue
		}
		idx, name, ok := strings.Cut(e.Name(), "-")
		if !ok || !idxRe.MatchString(idx) || name == "" {
			return nil, fmt.Errorf("discovering plugins: invalid plugin name %q, want NN-name", e.Name())
		}
		lp := &launchedPlugin{name: name, idx: idx, path: path}
		if cfgDir != "" {
			for _, f := range []string{e.Name() + ".conf", name + ".conf"} {
				if b, err := os.ReadFile(filepath.Join(cfgDir, f)); err == nil {
					lp.config = string(b)
					break
				} else if !errors.Is(err, os.ErrNotExist) {
					return nil, fmt.Errorf("reading plugin config: %w", err)
				}
			}
		}
		out = append(out, lp)
	}
	sort.Slice(out, func(i, j int) bool { return filepath.Base(out[i].path) < filepath.Base(out[j].path) })
	return out, nil
}

// launchPlugins starts every pre-installed plugin of this incarnation (must hold lmu). The child
// gets its end of the socketpair as fd 3 and an environment of exactly NRI_PLUGIN_NAME,
// NRI_PLUGIN_IDX and NRI_PLUGIN_SOCKET=3; stdout is /dev/null (stderr too unless PluginStderr).
func (rt *Runtime) launchPlugins() error {
	if rt.cfg.PluginDir == "" {
		return nil
	}
	found, err := discoverPlugins(rt.cfg.PluginDir, rt.cfg.PluginConfigDir)
	if err != nil {
		return err
	}
	for _, lp := range found {
		conn, err := rt.startPlugin(lp)
		if err != nil {
			rt.log.Log("plugin-launch-failed", Fields{"plugin": lp.idx + "-" + lp.name, "path": lp.path,
				"error": err})
			continue // upstream logs and goes on without it
		}
		rt.launched = append(rt.launched, lp)
		rt.seq++
		go rt.servePlugin(conn, rt.seq, lp)
	}
	return nil
}

func (rt *Runtime) startPlugin(lp *launchedPlugin) (net.Conn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	local := os.NewFile(uintptr(fds[0]), "nri-plugin-local")
	peerEnd := os.NewFile(uintptr(fds[1]), "nri-plugin-peer")
	defer peerEnd.Close()
	conn, err := net.FileConn(local)
	local.Close()
	if err != nil {
		return nil, fmt.Errorf("wrapping socketpair: %w", err)
	}
	cmd := exec.Command(lp.path)
	cmd.Env = []string{"NRI_PLUGIN_NAME=" + lp.name, "NRI_PLUGIN_IDX=" + lp.idx, "NRI_PLUGIN_SOCKET=3"}
	cmd.ExtraFiles = []*os.File{peerEnd} // fd 3
	if rt.cfg.PluginStderr != nil {
		cmd.Stderr = rt.cfg.PluginStderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("starting %s: %w", lp.path, err)
	}
	lp.cmd, lp.exited = cmd, make(chan struct{})
	label := lp.idx + "-" + lp.name
	rt.log.Log("plugin-launched", Fields{"plugin": label, "path": lp.path, "pid": cmd.Process.Pid,
		"config_bytes": len(lp.config)})
	go func() {
		err := cmd.Wait()
		close(lp.exited)
		rt.log.Log("plugin-exited", Fields{"plugin": label, "pid": cmd.Process.Pid, "status": errString(err)})
	}()
	return conn, nil
}

// killLaunched kills the pre-installed plugins (runtime stop/restart: upstream Process.Kill) and
// waits for them.
func (rt *Runtime) killLaunched() {
	rt.lmu.Lock()
	all := rt.launched
	rt.launched = nil
	rt.lmu.Unlock()
	for _, lp := range all {
		_ = lp.cmd.Process.Kill()
		<-lp.exited
	}
}
