// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"fmt"
	"strings"

	"colod/testpeer/mux"
)

// Version is the emulated NRI level. Each one stands for the runtimes that ship it (protocol
// brief §5.1/§5.2) and differs from its neighbours only where the wire does (§3.2-§3.5, §4.6).
type Version string

const (
	// V06 is NRI v0.6.1 (containerd 1.7.16-1.7.25, CRI-O 1.31; iSulad on openEuler 24.09 speaks
	// the same API): mask 0x7FF, no timeouts in Configure, Synchronize always one message (no
	// `more`), the mux sends one frame of at most 16 MiB and refuses larger writes (EMSGSIZE).
	V06 Version = "v0.6"
	// V08 is NRI v0.8 (containerd 1.7.26+ - 2.1, CRI-O 1.32 is v0.9 with the same wire):
	// StateChange for pod and post events, mask 0x7FF, chunked Synchronize.
	V08 Version = "v0.8"
	// V011 is NRI v0.11 (containerd 2.2.1+, CRI-O 1.35/1.36): mask 0x3FFF, StateChange still
	// carries pod and post events, ValidateContainerAdjustment reports field owners.
	V011 Version = "v0.11"
	// V012 is NRI v0.12 (containerd 2.3+): dedicated RPCs, NRI_version set.
	V012 Version = "v0.12"
)

// Versions lists the levels in ascending order.
var Versions = []Version{V06, V08, V011, V012}

// ParseVersion accepts v0.6, v0.8, v0.11, v0.12 (also with a patch: v0.6.1, v0.12.0).
func ParseVersion(s string) (Version, error) {
	for _, v := range Versions {
		if s == string(v) || strings.HasPrefix(s, string(v)+".") {
			return v, nil
		}
	}
	return "", fmt.Errorf("NRI version %q: want one of v0.6, v0.8, v0.11, v0.12", s)
}

func (v Version) minor() int {
	switch v {
	case V06:
		return 6
	case V08:
		return 8
	case V011:
		return 11
	}
	return 12
}

// ValidMask is the runtime's ValidEvents (§3.2).
func (v Version) ValidMask() int32 {
	if v.minor() < 10 {
		return 0x7FF
	}
	return 0x3FFF
}

// ConfigureTimeouts: ConfigureRequest carries registration/request timeouts (v0.7+).
func (v Version) ConfigureTimeouts() bool { return v.minor() >= 7 }

// ChunkedSync: Synchronize is split with `more` when it would exceed 4 MiB (v0.7+).
func (v Version) ChunkedSync() bool { return v.minor() >= 7 }

// DedicatedRPCs: pod events and container post-events have their own RPCs (v0.12+).
func (v Version) DedicatedRPCs() bool { return v.minor() >= 12 }

// Validation: ValidateContainerAdjustment with field owners (v0.10+).
func (v Version) Validation() bool { return v.minor() >= 10 }

// StrictNames: RegisterPlugin names must match [A-Za-z0-9_.+-]+ (v0.12+).
func (v Version) StrictNames() bool { return v.minor() >= 12 }

// NRIVersion is ConfigureRequest/RegisterPlugin NRI_version ("" before v0.12).
func (v Version) NRIVersion() string {
	if v.minor() >= 12 {
		return "v0.12.0"
	}
	return ""
}

// MuxOptions are the runtime mux's frame limits at this level (§1.2).
func (v Version) MuxOptions() mux.Options {
	if v.minor() < 7 {
		return mux.Options{MaxPayload: mux.LegacyMaxPayload, Split: false}
	}
	return mux.Options{MaxPayload: mux.MaxPayload, Split: true}
}

// DefaultRuntimeVersion is a containerd version that ships this level, so a plugin that infers
// the level from runtime_name/runtime_version (the Go stub's InferVersionFromRuntime) gets it
// right.
func (v Version) DefaultRuntimeVersion() string {
	switch v {
	case V06:
		return "1.7.20-colod-testpeer"
	case V08:
		return "2.1.0-colod-testpeer"
	case V011:
		return "2.2.1-colod-testpeer"
	}
	return "2.3.0-colod-testpeer"
}
