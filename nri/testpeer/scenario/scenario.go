// SPDX-License-Identifier: Apache-2.0

// Package scenario is the test peer's scenario format: pods, containers and a timeline of
// steps (README.md "Scenario format"). The same Step objects are the control-socket commands.
package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
)

// Resources are a container's kubelet-level resources.
type Resources struct {
	CPURequestMilli  int64             `json:"cpu_request_milli,omitempty"`
	CPULimitMilli    int64             `json:"cpu_limit_milli,omitempty"`
	MemoryLimitBytes int64             `json:"memory_limit_bytes,omitempty"`
	Cpus             string            `json:"cpus,omitempty"`
	Mems             string            `json:"mems,omitempty"`
	Unified          map[string]string `json:"unified,omitempty"`
}

// Pod is a pod sandbox.
type Pod struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	UID         string            `json:"uid,omitempty"`
	QoS         string            `json:"qos,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Container is a container of a pod.
type Container struct {
	Name        string            `json:"name"`
	Pod         string            `json:"pod"`
	Command     []string          `json:"command,omitempty"`
	Resources   *Resources        `json:"resources,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Fake        bool              `json:"fake,omitempty"`
}

// Step is one timeline entry or control command.
type Step struct {
	AtMs      int64      `json:"at_ms,omitempty"`
	Op        string     `json:"op"`
	Pod       string     `json:"pod,omitempty"`
	Container string     `json:"container,omitempty"`
	Resources *Resources `json:"resources,omitempty"`
	DelayMs   int64      `json:"delay_ms,omitempty"`
	Ms        int64      `json:"ms,omitempty"`
	Count     int        `json:"count,omitempty"`
	TimeoutMs int64      `json:"timeout_ms,omitempty"`
	Message   string     `json:"message,omitempty"`
	PodSpec   *Pod       `json:"pod_spec,omitempty"`
	CtrSpec   *Container `json:"container_spec,omitempty"`
}

// Scenario is a whole file.
type Scenario struct {
	Pods       []Pod       `json:"pods"`
	Containers []Container `json:"containers"`
	Timeline   []Step      `json:"timeline"`
}

// Ops lists every op and whether it needs a pod / container name.
var Ops = map[string]struct{ NeedPod, NeedCtr bool }{
	"run_pod": {NeedPod: true}, "stop_pod": {NeedPod: true}, "remove_pod": {NeedPod: true},
	"create": {NeedCtr: true}, "start": {NeedCtr: true}, "create_start": {NeedCtr: true},
	"stop": {NeedCtr: true}, "remove": {NeedCtr: true}, "update": {NeedCtr: true},
	"sleep": {}, "restart_runtime": {}, "wait_plugins": {}, "exit": {},
	"add_pod": {}, "add_container": {}, "list": {}, "plugins": {},
	// Fault injection (README "Faults") and inspection.
	"refuse_updates": {}, "lose_replies": {}, "outage": {}, "state": {NeedCtr: true},
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// ValidatePod checks one pod definition.
func ValidatePod(p *Pod) error {
	if !nameRe.MatchString(p.Name) {
		return fmt.Errorf("pod name %q: want [A-Za-z0-9][A-Za-z0-9_.-]{0,62}", p.Name)
	}
	switch p.QoS {
	case "", "guaranteed", "burstable", "besteffort":
	default:
		return fmt.Errorf("pod %s: qos %q: want guaranteed, burstable or besteffort", p.Name, p.QoS)
	}
	if p.UID != "" && !regexp.MustCompile(`^[0-9a-fA-F-]{8,64}$`).MatchString(p.UID) {
		return fmt.Errorf("pod %s: uid %q: want hex digits and dashes", p.Name, p.UID)
	}
	return nil
}

// ValidateContainer checks one container definition.
func ValidateContainer(c *Container) error {
	if !nameRe.MatchString(c.Name) {
		return fmt.Errorf("container name %q: want [A-Za-z0-9][A-Za-z0-9_.-]{0,62}", c.Name)
	}
	if c.Pod == "" {
		return fmt.Errorf("container %s: no pod", c.Name)
	}
	if !c.Fake && len(c.Command) == 0 {
		return fmt.Errorf("container %s: no command (set \"fake\": true for a container without a process)", c.Name)
	}
	return ValidateResources(c.Resources)
}

// ValidateResources checks value ranges.
func ValidateResources(r *Resources) error {
	if r == nil {
		return nil
	}
	if r.CPURequestMilli < 0 || r.CPULimitMilli < 0 || r.MemoryLimitBytes < 0 {
		return fmt.Errorf("resources: negative value")
	}
	if r.CPULimitMilli > 0 && r.CPULimitMilli < 10 {
		return fmt.Errorf("resources: cpu_limit_milli %d below 10 (quota < 1 ms)", r.CPULimitMilli)
	}
	return nil
}

// ValidateStep checks the op and its arguments (not the names it refers to).
func ValidateStep(s *Step) error {
	o, ok := Ops[s.Op]
	if !ok {
		return fmt.Errorf("unknown op %q", s.Op)
	}
	if o.NeedPod && s.Pod == "" {
		return fmt.Errorf("op %s needs \"pod\"", s.Op)
	}
	if o.NeedCtr && s.Container == "" {
		return fmt.Errorf("op %s needs \"container\"", s.Op)
	}
	if s.AtMs < 0 || s.DelayMs < 0 || s.Ms < 0 || s.TimeoutMs < 0 {
		return fmt.Errorf("op %s: negative time", s.Op)
	}
	if s.Count < 0 {
		return fmt.Errorf("op %s: negative count", s.Op)
	}
	if s.Message != "" && s.Op != "refuse_updates" {
		return fmt.Errorf("op %s: \"message\" is only for refuse_updates", s.Op)
	}
	if s.Op == "outage" && s.Ms == 0 {
		return fmt.Errorf("outage needs \"ms\" (how long the runtime stays away, at least 1)")
	}
	if s.Op == "add_pod" {
		if s.PodSpec == nil {
			return fmt.Errorf("add_pod needs \"pod_spec\"")
		}
		return ValidatePod(s.PodSpec)
	}
	if s.Op == "add_container" {
		if s.CtrSpec == nil {
			return fmt.Errorf("add_container needs \"container_spec\"")
		}
		return ValidateContainer(s.CtrSpec)
	}
	return ValidateResources(s.Resources)
}

// Parse decodes and validates a scenario (unknown fields are errors, to catch typos).
func Parse(data []byte) (*Scenario, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	pods := map[string]bool{}
	for i := range s.Pods {
		if err := ValidatePod(&s.Pods[i]); err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
		if pods[s.Pods[i].Name] {
			return nil, fmt.Errorf("scenario: duplicate pod %s", s.Pods[i].Name)
		}
		pods[s.Pods[i].Name] = true
	}
	ctrs := map[string]bool{}
	for i := range s.Containers {
		c := &s.Containers[i]
		if err := ValidateContainer(c); err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
		if !pods[c.Pod] {
			return nil, fmt.Errorf("scenario: container %s: unknown pod %s", c.Name, c.Pod)
		}
		if ctrs[c.Name] {
			return nil, fmt.Errorf("scenario: duplicate container %s", c.Name)
		}
		ctrs[c.Name] = true
	}
	for i := range s.Timeline {
		st := &s.Timeline[i]
		if err := ValidateStep(st); err != nil {
			return nil, fmt.Errorf("scenario: timeline[%d]: %w", i, err)
		}
		if st.Op == "add_pod" {
			pods[st.PodSpec.Name] = true
		}
		if st.Op == "add_container" {
			ctrs[st.CtrSpec.Name] = true
		}
		if Ops[st.Op].NeedPod && !pods[st.Pod] {
			return nil, fmt.Errorf("scenario: timeline[%d]: unknown pod %s", i, st.Pod)
		}
		if Ops[st.Op].NeedCtr && !ctrs[st.Container] {
			return nil, fmt.Errorf("scenario: timeline[%d]: unknown container %s", i, st.Container)
		}
	}
	sort.SliceStable(s.Timeline, func(i, j int) bool { return s.Timeline[i].AtMs < s.Timeline[j].AtMs })
	return &s, nil
}

// Load reads and parses a scenario file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return Parse(data)
}
