// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"fmt"
	"sort"

	api "colod/nriapi"
)

// field is NRI's Field enum (brief §3.3), the key of the owner tables. Only the fields this
// runtime models are claimed.
type field int32

const (
	fieldAnnotations field = 1
	fieldMemLimit    field = 8
	fieldCPUShares   field = 16
	fieldCPUQuota    field = 17
	fieldCPUPeriod   field = 18
	fieldCPUSetCPUs  field = 21
	fieldCPUSetMems  field = 22
	fieldPidsLimit   field = 23
	fieldUnified     field = 27
	fieldOomScoreAdj field = 29
)

// fieldNames are the Field enum names, which v0.10+ puts in its conflict errors.
var fieldNames = map[field]string{
	fieldAnnotations: "Annotations", fieldMemLimit: "MemLimit", fieldCPUShares: "CPUShares",
	fieldCPUQuota: "CPUQuota", fieldCPUPeriod: "CPUPeriod", fieldCPUSetCPUs: "CPUSetCPUs",
	fieldCPUSetMems: "CPUSetMems", fieldPidsLimit: "PidsLimit", fieldUnified: "CgroupsUnified",
	fieldOomScoreAdj: "OomScoreAdj",
}

// legacyNames are the words NRI before v0.10 uses for the same fields (result.go's claim*
// helpers); only the "plugins %q and %q both tried to set" prefix is common to every level.
var legacyNames = map[field]string{
	fieldAnnotations: "annotation", fieldMemLimit: "memory limit", fieldCPUShares: "CPU shares",
	fieldCPUQuota: "CPU quota", fieldCPUPeriod: "CPU period", fieldCPUSetCPUs: "CPU set cpus",
	fieldCPUSetMems: "CPU set mems", fieldPidsLimit: "pids limit", fieldUnified: "unified resource",
	fieldOomScoreAdj: "oom score adj",
}

func (f field) String() string {
	if n, ok := fieldNames[f]; ok {
		return n
	}
	return fmt.Sprintf("Field(%d)", int32(f))
}

// conflictError is an ownership conflict: plugin tried to set a field other already set.
type conflictError struct {
	Container, Plugin, Other string
	Field                    field
	Key                      string // compound fields (annotations, unified): the key
	msg                      string
}

func (e *conflictError) Error() string { return e.msg }

// owners records which plugin set which field of which container during one merge (one
// CreateContainer or UpdateContainer), as the adaptation's result.go does at every level: a
// second plugin setting the same field is a conflict.
type owners struct {
	ver      Version
	simple   map[string]map[field]string
	compound map[string]map[field]map[string]string
}

func newOwners(v Version) *owners {
	return &owners{ver: v, simple: map[string]map[field]string{},
		compound: map[string]map[field]map[string]string{}}
}

func (o *owners) conflict(ctr string, f field, key, plugin, other string) error {
	what := f.String()
	var msg string
	if o.ver.Validation() {
		if key != "" {
			what += " (" + key + ")"
		}
		msg = fmt.Sprintf("plugins %q and %q both tried to set %s", plugin, other, what)
	} else {
		what = legacyNames[f]
		if key != "" {
			what += " " + key
		}
		msg = fmt.Sprintf("plugins %q and %q both tried to set %s for container %s", plugin, other,
			what, ctr)
	}
	return &conflictError{Container: ctr, Plugin: plugin, Other: other, Field: f, Key: key, msg: msg}
}

func (o *owners) claim(ctr string, f field, plugin string) error {
	m := o.simple[ctr]
	if m == nil {
		m = map[field]string{}
		o.simple[ctr] = m
	}
	if other, ok := m[f]; ok && other != plugin {
		return o.conflict(ctr, f, "", plugin, other)
	}
	m[f] = plugin
	return nil
}

func (o *owners) claimKey(ctr string, f field, key, plugin string) error {
	byField := o.compound[ctr]
	if byField == nil {
		byField = map[field]map[string]string{}
		o.compound[ctr] = byField
	}
	m := byField[f]
	if m == nil {
		m = map[string]string{}
		byField[f] = m
	}
	if other, ok := m[key]; ok && other != plugin {
		return o.conflict(ctr, f, key, plugin, other)
	}
	m[key] = plugin
	return nil
}

// claimResources claims every field r sets (present optionals, non-empty cpusets, unified keys).
func (o *owners) claimResources(ctr string, r *api.LinuxResources, plugin string) error {
	if r == nil {
		return nil
	}
	var claims []field
	if c := r.Cpu; c != nil {
		if c.Shares != nil {
			claims = append(claims, fieldCPUShares)
		}
		if c.Quota != nil {
			claims = append(claims, fieldCPUQuota)
		}
		if c.Period != nil {
			claims = append(claims, fieldCPUPeriod)
		}
		if c.Cpus != "" {
			claims = append(claims, fieldCPUSetCPUs)
		}
		if c.Mems != "" {
			claims = append(claims, fieldCPUSetMems)
		}
	}
	if m := r.Memory; m != nil && m.Limit != nil {
		claims = append(claims, fieldMemLimit)
	}
	if r.Pids != nil {
		claims = append(claims, fieldPidsLimit)
	}
	for _, f := range claims {
		if err := o.claim(ctr, f, plugin); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(r.Unified))
	for k := range r.Unified {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := o.claimKey(ctr, fieldUnified, k, plugin); err != nil {
			return err
		}
	}
	return nil
}

// claimAdjust claims what a CreateContainer adjustment sets on the new container.
func (o *owners) claimAdjust(ctr string, a *api.ContainerAdjustment, plugin string) error {
	if a == nil {
		return nil
	}
	keys := make([]string, 0, len(a.Annotations))
	for k := range a.Annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := o.claimKey(ctr, fieldAnnotations, k, plugin); err != nil {
			return err
		}
	}
	if a.Linux == nil {
		return nil
	}
	if a.Linux.OomScoreAdj != nil {
		if err := o.claim(ctr, fieldOomScoreAdj, plugin); err != nil {
			return err
		}
	}
	return o.claimResources(ctr, a.Linux.Resources, plugin)
}

// proto is the v0.10+ OwningPlugins of the merge (ValidateContainerAdjustmentRequest.owners).
func (o *owners) proto() *api.OwningPlugins {
	out := &api.OwningPlugins{Owners: map[string]*api.FieldOwners{}}
	get := func(ctr string) *api.FieldOwners {
		fo := out.Owners[ctr]
		if fo == nil {
			fo = &api.FieldOwners{Simple: map[int32]string{}, Compound: map[int32]*api.CompoundFieldOwners{}}
			out.Owners[ctr] = fo
		}
		return fo
	}
	for ctr, m := range o.simple {
		fo := get(ctr)
		for f, p := range m {
			fo.Simple[int32(f)] = p
		}
	}
	for ctr, byField := range o.compound {
		fo := get(ctr)
		for f, m := range byField {
			fo.Compound[int32(f)] = &api.CompoundFieldOwners{Owners: copyMap(m)}
		}
	}
	return out
}

// describe is a container's owners for the event log: {"CPUSetCPUs": "20-topology", ...}.
func (o *owners) describe(ctr string) map[string]string {
	out := map[string]string{}
	for f, p := range o.simple[ctr] {
		out[f.String()] = p
	}
	for f, m := range o.compound[ctr] {
		for k, p := range m {
			out[f.String()+"/"+k] = p
		}
	}
	return out
}

// claimUpdates claims the updates of other containers in a reply. A conflicting update with
// ignore_failure is dropped (logged); without it the conflict fails the merge (brief §3.5).
func (rt *Runtime) claimUpdates(o *owners, ups []*api.ContainerUpdate, plugin, event string) ([]*api.ContainerUpdate, error) {
	out := make([]*api.ContainerUpdate, 0, len(ups))
	for _, u := range ups {
		if u.Linux == nil {
			continue
		}
		if err := o.claimResources(u.ContainerId, u.Linux.Resources, plugin); err != nil {
			rt.logConflict(err, event, u.IgnoreFailure, "")
			if u.IgnoreFailure {
				continue
			}
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// logConflict writes ownership-conflict for a conflictError (others are ignored).
// name is the container's name when it is not in ctrByID yet (the one being created).
func (rt *Runtime) logConflict(err error, event string, dropped bool, name string) {
	ce, ok := err.(*conflictError)
	if !ok {
		return
	}
	f := Fields{"container_id": ce.Container, "field": ce.Field.String(), "plugin": ce.Plugin,
		"other": ce.Other, "event": event, "error": ce.msg, "dropped": dropped}
	if c, ok := rt.ctrByID[ce.Container]; ok {
		f["container"] = c.spec.Name
	} else if name != "" {
		f["container"] = name
	}
	if ce.Key != "" {
		f["key"] = ce.Key
	}
	rt.log.Log("ownership-conflict", f)
}
