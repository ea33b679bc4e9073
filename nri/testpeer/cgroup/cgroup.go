// SPDX-License-Identifier: Apache-2.0

// Package cgroup creates container cgroups and applies resources to them the way runc does
// (libcontainer/cgroups/fs for v1, fs2 for v2), logging each file it changes.
package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Mode is the host's cgroup layout.
type Mode int

const (
	// V1 is a v1 (hybrid) host: per-controller hierarchies, maybe cgroup2 at unified/.
	V1 Mode = iota
	// V2 is a pure cgroup2 host.
	V2
)

func (m Mode) String() string {
	if m == V2 {
		return "v2"
	}
	return "v1"
}

// v1Controllers are the hierarchies a container cgroup is made in on v1.
var v1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory"}

// Resources is what can be applied to a container cgroup. Nil pointers / empty strings mean
// "leave unchanged" (NRI's optional wrappers).
type Resources struct {
	Shares   *uint64
	Quota    *int64
	Period   *uint64
	Cpus     string
	Mems     string
	MemLimit *int64
	Unified  map[string]string
}

// Empty reports whether r changes nothing.
func (r *Resources) Empty() bool {
	return r == nil || (r.Shares == nil && r.Quota == nil && r.Period == nil && r.Cpus == "" &&
		r.Mems == "" && r.MemLimit == nil && len(r.Unified) == 0)
}

// Change is one control-file write.
type Change struct {
	Container string
	File      string
	Old       string
	New       string
	Value     string
	Source    string
	Err       error
}

// Logger receives every change (successful or not).
type Logger func(Change)

// Options configure a Manager.
type Options struct {
	// Root is the cgroup mount root, /sys/fs/cgroup on a real host.
	Root string
	// CreateFiles makes missing control files when writing (fake trees in tests only: on a
	// real cgroupfs the kernel creates them with the directory).
	CreateFiles bool
	Log         Logger
}

// Manager owns the cgroups it created.
type Manager struct {
	mode        Mode
	v1          map[string]string // controller -> hierarchy mount dir
	unified     string            // cgroup2 hierarchy dir ("" if none)
	createFiles bool
	log         Logger

	mu      sync.Mutex
	created map[string]bool // absolute dirs made by us
}

// New detects the layout under opts.Root.
func New(opts Options) (*Manager, error) {
	m := &Manager{v1: map[string]string{}, createFiles: opts.CreateFiles, log: opts.Log,
		created: map[string]bool{}}
	if m.log == nil {
		m.log = func(Change) {}
	}
	root := opts.Root
	if exists(filepath.Join(root, "cgroup.controllers")) {
		m.mode = V2
		m.unified = root
		return m, nil
	}
	m.mode = V1
	for _, c := range v1Controllers {
		dir := filepath.Join(root, c)
		if !isDir(dir) {
			return nil, fmt.Errorf("cgroup v1 hierarchy %s missing (no cgroup.controllers in %s either)", dir, root)
		}
		m.v1[c] = dir
	}
	if u := filepath.Join(root, "unified"); exists(filepath.Join(u, "cgroup.controllers")) {
		m.unified = u
	}
	return m, nil
}

// Mode returns the detected layout.
func (m *Manager) Mode() Mode { return m.mode }

// Dirs returns the absolute directories of rel, one per hierarchy ("unified" for cgroup2).
func (m *Manager) Dirs(rel string) map[string]string {
	out := map[string]string{}
	for c, d := range m.v1 {
		out[c] = filepath.Join(d, rel)
	}
	if m.unified != "" {
		out["unified"] = filepath.Join(m.unified, rel)
	}
	return out
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
func isDir(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }

func cleanRel(rel string) (string, error) {
	c := filepath.Clean("/" + rel)
	if c == "/" || strings.Contains(rel, "..") {
		return "", fmt.Errorf("bad cgroup path %q", rel)
	}
	return strings.TrimPrefix(c, "/"), nil
}

// Create makes rel (and missing ancestors) in every hierarchy.
func (m *Manager) Create(rel string) error {
	rel, err := cleanRel(rel)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range v1Controllers {
		if d, ok := m.v1[c]; ok {
			if err := m.mkdirAll(d, rel, c); err != nil {
				return err
			}
		}
	}
	if m.unified != "" {
		if err := m.mkdirAll(m.unified, rel, "unified"); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) mkdirAll(root, rel, ctrl string) error {
	cur := root
	for _, part := range strings.Split(rel, "/") {
		parent := cur
		cur = filepath.Join(cur, part)
		if isDir(cur) {
			continue
		}
		if m.mode == V2 {
			// Controllers must be enabled in the parent before the child can use them.
			m.enableControllers(parent)
		}
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("mkdir %s: %w", cur, err)
		}
		m.created[cur] = true
		if ctrl == "cpuset" || (m.mode == V2 && ctrl == "unified") {
			// runc (cpusetEnsureParent/cpusetCopyIfNeeded): an empty cpuset.cpus/mems in a
			// new v1 cpuset cgroup means no task can join; copy the parent's.
			if m.mode == V1 {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if v, _ := m.readFile(filepath.Join(cur, f)); strings.TrimSpace(v) == "" {
						pv, err := m.readFile(filepath.Join(parent, f))
						if err != nil {
							return fmt.Errorf("reading %s: %w", filepath.Join(parent, f), err)
						}
						if err := m.writeFile(filepath.Join(cur, f), strings.TrimSpace(pv)); err != nil {
							return fmt.Errorf("copying %s to %s: %w", f, cur, err)
						}
					}
				}
			}
		}
	}
	return nil
}

func (m *Manager) enableControllers(dir string) {
	avail, err := m.readFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return
	}
	have := map[string]bool{}
	for _, c := range strings.Fields(avail) {
		have[c] = true
	}
	cur, _ := m.readFile(filepath.Join(dir, "cgroup.subtree_control"))
	enabled := map[string]bool{}
	for _, c := range strings.Fields(cur) {
		enabled[c] = true
	}
	for _, c := range []string{"cpu", "cpuset", "memory"} {
		if have[c] && !enabled[c] {
			// Best effort: a controller that cannot be enabled shows up later as a failed write.
			_ = m.writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c)
		}
	}
}

// AddProc moves pid into rel in every hierarchy.
func (m *Manager) AddProc(rel string, pid int) error {
	rel, err := cleanRel(rel)
	if err != nil {
		return err
	}
	for name, d := range m.Dirs(rel) {
		if err := m.writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("adding pid %d to %s cgroup %s: %w", pid, name, d, err)
		}
	}
	return nil
}

// Remove removes rel in every hierarchy (killing stragglers), if we created it.
func (m *Manager) Remove(rel string) error {
	rel, err := cleanRel(rel)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []string
	for _, d := range m.Dirs(rel) {
		if !m.created[d] {
			continue
		}
		if err := m.rmdir(d); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// Cleanup removes every directory this manager created, deepest first.
func (m *Manager) Cleanup() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dirs := make([]string, 0, len(m.created))
	for d := range m.created {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []string
	for _, d := range dirs {
		if err := m.rmdir(d); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// rmdir removes d (must hold mu): kills processes still in it, retries while busy.
func (m *Manager) rmdir(d string) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		var err error
		if m.createFiles {
			err = os.RemoveAll(d) // fake tree: control files are plain files
		} else {
			err = os.Remove(d)
		}
		if err == nil || errors.Is(err, os.ErrNotExist) {
			delete(m.created, d)
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("rmdir %s: %w", d, err)
		}
		if procs, rerr := m.readFile(filepath.Join(d, "cgroup.procs")); rerr == nil {
			for _, f := range strings.Fields(procs) {
				if pid, perr := strconv.Atoi(f); perr == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *Manager) readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

func (m *Manager) writeFile(p, v string) error {
	flags := os.O_WRONLY | os.O_TRUNC
	if m.createFiles {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(p, flags|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Read returns the trimmed content of file in rel's cgroup of the hierarchy that owns it.
func (m *Manager) Read(rel, file string) (string, error) {
	p, err := m.filePath(rel, file)
	if err != nil {
		return "", err
	}
	v, err := m.readFile(p)
	return strings.TrimSpace(v), err
}

// filePath maps a control file to its hierarchy: v1 by the controller prefix, v2 unified.
func (m *Manager) filePath(rel, file string) (string, error) {
	rel, err := cleanRel(rel)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(file, "/\x00") || strings.HasPrefix(file, ".") || file == "" {
		return "", fmt.Errorf("bad cgroup file name %q", file)
	}
	if m.mode == V2 {
		return filepath.Join(m.unified, rel, file), nil
	}
	ctrl := file
	if i := strings.IndexByte(file, '.'); i > 0 {
		ctrl = file[:i]
	}
	d, ok := m.v1[ctrl]
	if !ok {
		return "", fmt.Errorf("no cgroup v1 hierarchy for %q", file)
	}
	return filepath.Join(d, rel, file), nil
}

// set writes one file, logging old and read-back values.
func (m *Manager) set(container, source, rel, file, value string) error {
	p, err := m.filePath(rel, file)
	if err != nil {
		m.log(Change{Container: container, File: file, Value: value, Source: source, Err: err})
		return err
	}
	old, _ := m.readFile(p)
	if err := m.writeFile(p, value); err != nil {
		err = fmt.Errorf("writing %q to %s: %w", value, p, err)
		m.log(Change{Container: container, File: p, Old: strings.TrimSpace(old), Value: value,
			Source: source, Err: err})
		return err
	}
	nv, _ := m.readFile(p)
	m.log(Change{Container: container, File: p, Old: strings.TrimSpace(old),
		New: strings.TrimSpace(nv), Value: value, Source: source})
	return nil
}

// SharesToWeight is runc's cgroup v1 shares → v2 weight conversion.
func SharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	if shares < 2 {
		shares = 2
	}
	if shares > 262144 {
		shares = 262144
	}
	return 1 + ((shares-2)*9999)/262142
}

// WeightToShares inverts SharesToWeight: the smallest shares value whose weight is w, so
// SharesToWeight(WeightToShares(w)) == w. The forward conversion rounds down, so shares read
// back from cpu.weight are not the shares written (1024 → weight 39 → 999).
func WeightToShares(w uint64) uint64 {
	if w == 0 {
		return 0
	}
	if w > 10000 {
		w = 10000
	}
	return 2 + ((w-1)*262142+9998)/9999
}

// Apply applies r to rel. It stops at the first failure (as runc's Set does).
func (m *Manager) Apply(container, source, rel string, r *Resources) error {
	if r.Empty() {
		return nil
	}
	if m.mode == V2 {
		return m.applyV2(container, source, rel, r)
	}
	return m.applyV1(container, source, rel, r)
}

func (m *Manager) applyV1(ctr, src, rel string, r *Resources) error {
	// cpuset first (runc's subsystem order: cpuset, ..., memory, cpu).
	if r.Cpus != "" {
		if err := m.set(ctr, src, rel, "cpuset.cpus", r.Cpus); err != nil {
			return err
		}
	}
	if r.Mems != "" {
		if err := m.set(ctr, src, rel, "cpuset.mems", r.Mems); err != nil {
			return err
		}
	}
	if r.MemLimit != nil && *r.MemLimit != 0 {
		if err := m.setMemoryV1(ctr, src, rel, *r.MemLimit); err != nil {
			return err
		}
	}
	if r.Shares != nil && *r.Shares != 0 {
		if err := m.set(ctr, src, rel, "cpu.shares", strconv.FormatUint(*r.Shares, 10)); err != nil {
			return err
		}
	}
	// runc fs/cpu.go: period first; if the kernel refuses it (EINVAL because the current quota
	// does not fit), write the quota first and retry.
	var period, quota string
	if r.Period != nil && *r.Period != 0 {
		period = strconv.FormatUint(*r.Period, 10)
	}
	if r.Quota != nil && *r.Quota != 0 {
		quota = strconv.FormatInt(*r.Quota, 10)
	}
	if period != "" {
		if err := m.set(ctr, src, rel, "cpu.cfs_period_us", period); err != nil {
			if quota == "" || !errors.Is(err, syscall.EINVAL) {
				return err
			}
			if err := m.set(ctr, src, rel, "cpu.cfs_quota_us", quota); err != nil {
				return err
			}
			quota = ""
			if err := m.set(ctr, src, rel, "cpu.cfs_period_us", period); err != nil {
				return err
			}
		}
	}
	if quota != "" {
		if err := m.set(ctr, src, rel, "cpu.cfs_quota_us", quota); err != nil {
			return err
		}
	}
	return m.applyUnified(ctr, src, rel, r.Unified)
}

func (m *Manager) setMemoryV1(ctr, src, rel string, limit int64) error {
	v := strconv.FormatInt(limit, 10)
	swapFile, _ := m.filePath(rel, "memory.memsw.limit_in_bytes")
	if !exists(swapFile) {
		return m.set(ctr, src, rel, "memory.limit_in_bytes", v)
	}
	// containerd sets swap = limit when the swap controller exists; runc orders the two writes
	// so that memsw >= limit holds at every step.
	cur, _ := m.Read(rel, "memory.memsw.limit_in_bytes")
	curSwap, perr := strconv.ParseInt(cur, 10, 64)
	growing := limit == -1 || (perr == nil && limit > curSwap)
	if growing {
		if err := m.set(ctr, src, rel, "memory.memsw.limit_in_bytes", v); err != nil {
			return err
		}
		return m.set(ctr, src, rel, "memory.limit_in_bytes", v)
	}
	if err := m.set(ctr, src, rel, "memory.limit_in_bytes", v); err != nil {
		return err
	}
	return m.set(ctr, src, rel, "memory.memsw.limit_in_bytes", v)
}

func (m *Manager) applyV2(ctr, src, rel string, r *Resources) error {
	if r.Cpus != "" {
		if err := m.set(ctr, src, rel, "cpuset.cpus", r.Cpus); err != nil {
			return err
		}
	}
	if r.Mems != "" {
		if err := m.set(ctr, src, rel, "cpuset.mems", r.Mems); err != nil {
			return err
		}
	}
	if r.MemLimit != nil && *r.MemLimit != 0 {
		v := "max"
		if *r.MemLimit > 0 {
			v = strconv.FormatInt(*r.MemLimit, 10)
		}
		// swap = limit (containerd) → memory.swap.max = swap - limit = 0 (runc's conversion).
		if sp, _ := m.filePath(rel, "memory.swap.max"); exists(sp) {
			sv := "0"
			if v == "max" {
				sv = "max"
			}
			if err := m.set(ctr, src, rel, "memory.swap.max", sv); err != nil {
				return err
			}
		}
		if err := m.set(ctr, src, rel, "memory.max", v); err != nil {
			return err
		}
	}
	if r.Shares != nil && *r.Shares != 0 {
		w := strconv.FormatUint(SharesToWeight(*r.Shares), 10)
		if err := m.set(ctr, src, rel, "cpu.weight", w); err != nil {
			return err
		}
	}
	// runc fs2 setCpu: "max" unless quota > 0, the period appended when given.
	if (r.Quota != nil && *r.Quota != 0) || (r.Period != nil && *r.Period != 0) {
		v := "max"
		if r.Quota != nil && *r.Quota > 0 {
			v = strconv.FormatInt(*r.Quota, 10)
		}
		if r.Period != nil && *r.Period != 0 {
			v += " " + strconv.FormatUint(*r.Period, 10)
		}
		if err := m.set(ctr, src, rel, "cpu.max", v); err != nil {
			return err
		}
	}
	return m.applyUnified(ctr, src, rel, r.Unified)
}

func (m *Manager) applyUnified(ctr, src, rel string, u map[string]string) error {
	keys := make([]string, 0, len(u))
	for k := range u {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p, err := m.filePath(rel, k)
		if err == nil && !m.createFiles && !exists(p) {
			err = fmt.Errorf("unified key %q: no such cgroup file %s", k, p)
		}
		if err != nil {
			m.log(Change{Container: ctr, File: k, Value: u[k], Source: src, Err: err})
			return err
		}
		if err := m.set(ctr, src, rel, k, u[k]); err != nil {
			return err
		}
	}
	return nil
}
