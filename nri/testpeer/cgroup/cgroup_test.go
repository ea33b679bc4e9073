// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func write(t *testing.T, p, v string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func fakeV1(t *testing.T) string {
	root := t.TempDir()
	for _, c := range v1Controllers {
		os.MkdirAll(filepath.Join(root, c), 0o755)
	}
	write(t, filepath.Join(root, "cpuset", "cpuset.cpus"), "0-3\n")
	write(t, filepath.Join(root, "cpuset", "cpuset.mems"), "0\n")
	write(t, filepath.Join(root, "unified", "cgroup.controllers"), "")
	return root
}

func TestV1CreateCopiesCpusetAndAppliesLikeRunc(t *testing.T) {
	root := fakeV1(t)
	var changes []Change
	m, err := New(Options{Root: root, CreateFiles: true, Log: func(c Change) { changes = append(changes, c) }})
	if err != nil || m.Mode() != V1 {
		t.Fatalf("New: %v mode %v", err, m.Mode())
	}
	rel := "pfx/kubepods/burstable/podX/ctr"
	if err := m.Create(rel); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(root, "cpuset", rel, "cpuset.cpus")); got != "0-3" {
		t.Fatalf("cpuset.cpus copied = %q", got)
	}
	if !isDir(filepath.Join(root, "unified", rel)) || !isDir(filepath.Join(root, "cpuacct", rel)) {
		t.Fatal("cgroup not created in unified/cpuacct")
	}
	err = m.Apply("c1", "update", rel, &Resources{Shares: u64(512), Quota: i64(50000),
		Period: u64(100000), Cpus: "1", MemLimit: i64(1 << 28), Unified: map[string]string{"cpu.idle": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{
		"cpu/" + rel + "/cpu.shares": "512", "cpu/" + rel + "/cpu.cfs_quota_us": "50000",
		"cpu/" + rel + "/cpu.cfs_period_us": "100000", "cpuset/" + rel + "/cpuset.cpus": "1",
		"memory/" + rel + "/memory.limit_in_bytes": "268435456", "cpu/" + rel + "/cpu.idle": "1",
	} {
		if got := read(t, filepath.Join(root, f)); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	last := changes[len(changes)-1]
	if last.Container != "c1" || last.Source != "update" || last.New != "1" || last.Err != nil {
		t.Errorf("last change %+v", last)
	}
	if err := m.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if isDir(filepath.Join(root, "cpu", "pfx")) {
		t.Fatal("cleanup left the prefix behind")
	}
}

func TestV1MemswOrderedWithLimit(t *testing.T) {
	root := fakeV1(t)
	var files []string
	m, _ := New(Options{Root: root, CreateFiles: true, Log: func(c Change) { files = append(files, filepath.Base(c.File)) }})
	rel := "p/c"
	m.Create(rel)
	write(t, filepath.Join(root, "memory", rel, "memory.memsw.limit_in_bytes"), "1000")
	if err := m.Apply("c", "s", rel, &Resources{MemLimit: i64(4000)}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(files, ",") != "memory.memsw.limit_in_bytes,memory.limit_in_bytes" {
		t.Fatalf("growing order %v", files)
	}
	files = nil
	m.Apply("c", "s", rel, &Resources{MemLimit: i64(2000)})
	if strings.Join(files, ",") != "memory.limit_in_bytes,memory.memsw.limit_in_bytes" {
		t.Fatalf("shrinking order %v", files)
	}
}

func TestV2ConversionsAndUnified(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory pids")
	m, err := New(Options{Root: root, CreateFiles: true})
	if err != nil || m.Mode() != V2 {
		t.Fatalf("New: %v", err)
	}
	rel := "pfx/kubepods.slice/x.scope"
	if err := m.Create(rel); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(root, "cgroup.subtree_control")); got == "" {
		t.Fatal("controllers not enabled at the root")
	}
	if err := m.Apply("c", "s", rel, &Resources{Shares: u64(1024), Quota: i64(-1), Period: u64(100000),
		MemLimit: i64(-1), Unified: map[string]string{"cpu.idle": "1"}}); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(root, rel)
	for f, want := range map[string]string{"cpu.weight": "39", "cpu.max": "max 100000",
		"memory.max": "max", "cpu.idle": "1"} {
		if got := read(t, filepath.Join(d, f)); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	m.Apply("c", "s", rel, &Resources{Quota: i64(50000)})
	if got := read(t, filepath.Join(d, "cpu.max")); got != "50000" {
		t.Errorf("cpu.max = %q", got)
	}
	if SharesToWeight(2) != 1 || SharesToWeight(262144) != 10000 || SharesToWeight(0) != 0 {
		t.Error("SharesToWeight bounds")
	}
}

func TestRejectsEscapingPathsAndFiles(t *testing.T) {
	m, _ := New(Options{Root: fakeV1(t), CreateFiles: true})
	if err := m.Create("../../etc"); err == nil {
		t.Fatal("Create accepted ..")
	}
	m.Create("a/b")
	if err := m.Apply("c", "s", "a/b", &Resources{Unified: map[string]string{"../x": "1"}}); err == nil {
		t.Fatal("unified key with / accepted")
	}
	if err := m.Apply("c", "s", "a/b", &Resources{Unified: map[string]string{"io.max": "1"}}); err == nil {
		t.Fatal("unified key without v1 hierarchy accepted")
	}
}

// Reading shares back from cpu.weight: the smallest shares of that weight, so the round trip
// weight → shares → weight is exact even though shares → weight → shares is not.
func TestWeightToSharesInvertsSharesToWeight(t *testing.T) {
	for w := uint64(1); w <= 10000; w++ {
		s := WeightToShares(w)
		if SharesToWeight(s) != w || (s > 2 && SharesToWeight(s-1) == w) {
			t.Fatalf("weight %d → shares %d → weight %d", w, s, SharesToWeight(s))
		}
	}
	if got := WeightToShares(SharesToWeight(1024)); got != 999 {
		t.Errorf("1024 shares read back as %d, want 999", got)
	}
	if WeightToShares(0) != 0 {
		t.Error("weight 0 (unset) is not shares 0")
	}
}
