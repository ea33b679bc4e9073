// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	api "colod/nriapi"
	"colod/testpeer/cgroup"
)

// The state op: a container's resources as the runtime's spec holds them and as its cgroup
// files read back, in one shape, so a test compares the two (and what it asked for) directly:
//
//	cpu_quota (-1 = unlimited), cpu_period, cpu_shares, cpus, mems, memory_limit (-1 =
//	unlimited), and on cgroup v2 cpu_weight.
//
// Spec fields that are unset are null. cpus/mems are normalized kernel lists ("0,1" → "0-1").
// On v2 cgroup.cpu_shares is cpu.weight converted back (cgroup.WeightToShares), which is not
// exact, so both views also carry cpu_weight (the spec's computed with runc's conversion).

// containerState is the state op (must hold mu).
func (rt *Runtime) containerState(name string) (interface{}, error) {
	c, ok := rt.ctrs[name]
	if !ok {
		return nil, fmt.Errorf("container %s not created", name)
	}
	v2 := rt.cg != nil && rt.cg.Mode() == cgroup.V2
	out := map[string]interface{}{
		"name": c.spec.Name, "id": c.id, "state": c.state.String(), "pid": c.pid,
		"cgroup_rel": c.rel, "cgroup_mode": nil, "spec": specState(c.res, v2), "cgroup": nil,
	}
	if rt.cg != nil {
		out["cgroup_mode"] = rt.cg.Mode().String()
	}
	if c.rel == "" {
		return out, nil // fake container: no cgroup
	}
	cg, err := rt.cgroupState(c.rel)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", name, err)
	}
	out["cgroup"] = cg
	return out, nil
}

// specState normalizes NRI resources (unset = null).
func specState(r *api.LinuxResources, v2 bool) map[string]interface{} {
	out := map[string]interface{}{"cpu_quota": nil, "cpu_period": nil, "cpu_shares": nil,
		"cpus": nil, "mems": nil, "memory_limit": nil}
	if v2 {
		out["cpu_weight"] = nil
	}
	if r == nil {
		return out
	}
	if c := r.Cpu; c != nil {
		if c.Quota != nil {
			out["cpu_quota"] = c.Quota.Value
		}
		if c.Period != nil {
			out["cpu_period"] = c.Period.Value
		}
		if c.Shares != nil {
			out["cpu_shares"] = c.Shares.Value
			if v2 {
				out["cpu_weight"] = cgroup.SharesToWeight(c.Shares.Value)
			}
		}
		if c.Cpus != "" {
			out["cpus"] = normalizeList(c.Cpus)
		}
		if c.Mems != "" {
			out["mems"] = normalizeList(c.Mems)
		}
	}
	if m := r.Memory; m != nil && m.Limit != nil {
		out["memory_limit"] = m.Limit.Value
	}
	return out
}

// cgroupState reads the same fields back from the cgroup files. A field whose control file
// does not exist (its controller is not enabled there) is null; any other failure is an error.
func (rt *Runtime) cgroupState(rel string) (map[string]interface{}, error) {
	rd := func(file string) (string, bool, error) {
		v, err := rt.cg.Read(rel, file)
		if errors.Is(err, os.ErrNotExist) {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("reading %s: %w", file, err)
		}
		return v, true, nil
	}
	out := map[string]interface{}{"cpu_quota": nil, "cpu_period": nil, "cpu_shares": nil,
		"cpus": nil, "mems": nil, "memory_limit": nil}
	var err error
	if rt.cg.Mode() == cgroup.V2 {
		err = readV2State(rd, out)
	} else {
		err = readV1State(rd, out)
	}
	if err != nil {
		return nil, err
	}
	for key, file := range map[string]string{"cpus": "cpuset.cpus", "mems": "cpuset.mems"} {
		v, ok, err := rd(file)
		if err != nil {
			return nil, err
		}
		if ok {
			out[key] = normalizeList(v)
		}
	}
	return out, nil
}

type readFn func(file string) (value string, exists bool, err error)

// readInt reads one integer file into out[key]; conv maps the kernel's text (e.g. "max").
func readInt(rd readFn, out map[string]interface{}, key, file string, conv func(string) (int64, error)) error {
	v, ok, err := rd(file)
	if err != nil || !ok {
		return err
	}
	n, err := conv(v)
	if err != nil {
		return fmt.Errorf("%s: %q: %w", file, v, err)
	}
	out[key] = n
	return nil
}

func parseInt(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }

// parseV1Limit maps v1's "no limit" (LONG_MAX rounded down to the page size, so it differs by
// architecture) to -1.
func parseV1Limit(s string) (int64, error) {
	n, err := parseInt(s)
	if err == nil && n >= math.MaxInt64&^(1<<21-1) {
		n = -1
	}
	return n, err
}

// parseMax maps v2's "max" to -1.
func parseMax(s string) (int64, error) {
	if s == "max" {
		return -1, nil
	}
	return parseInt(s)
}

func readV1State(rd readFn, out map[string]interface{}) error {
	if err := readInt(rd, out, "cpu_quota", "cpu.cfs_quota_us", parseInt); err != nil {
		return err
	}
	if err := readInt(rd, out, "cpu_period", "cpu.cfs_period_us", parseInt); err != nil {
		return err
	}
	if err := readInt(rd, out, "cpu_shares", "cpu.shares", parseInt); err != nil {
		return err
	}
	return readInt(rd, out, "memory_limit", "memory.limit_in_bytes", parseV1Limit)
}

func readV2State(rd readFn, out map[string]interface{}) error {
	out["cpu_weight"] = nil
	v, ok, err := rd("cpu.max")
	if err != nil {
		return err
	}
	if ok {
		// "$MAX $PERIOD", MAX being "max" or the quota.
		f := strings.Fields(v)
		if len(f) != 2 {
			return fmt.Errorf("cpu.max: %q: want \"quota|max period\"", v)
		}
		q, qerr := parseMax(f[0])
		p, perr := parseInt(f[1])
		if qerr != nil || perr != nil {
			return fmt.Errorf("cpu.max: %q: not \"quota|max period\"", v)
		}
		out["cpu_quota"], out["cpu_period"] = q, p
	}
	if err := readInt(rd, out, "cpu_weight", "cpu.weight", parseInt); err != nil {
		return err
	}
	if w, ok := out["cpu_weight"].(int64); ok && w > 0 {
		out["cpu_shares"] = int64(cgroup.WeightToShares(uint64(w)))
	}
	return readInt(rd, out, "memory_limit", "memory.max", parseMax)
}

// normalizeList rewrites a cpu/node list ("3,0-1,2") the way the kernel prints it ("0-3").
// Ranges are merged, never expanded, so a huge range costs nothing. Text that is not a list
// is returned as it is: the state op reports, it does not judge.
func normalizeList(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	type span struct{ lo, hi uint64 }
	var spans []span
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			return s
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 32); err != nil || b < a {
				return s
			}
		}
		spans = append(spans, span{a, b})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		last := &merged[len(merged)-1]
		if sp.lo <= last.hi+1 {
			if sp.hi > last.hi {
				last.hi = sp.hi
			}
			continue
		}
		merged = append(merged, sp)
	}
	parts := make([]string, 0, len(merged))
	for _, sp := range merged {
		if sp.lo == sp.hi {
			parts = append(parts, strconv.FormatUint(sp.lo, 10))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", sp.lo, sp.hi))
		}
	}
	return strings.Join(parts, ",")
}
