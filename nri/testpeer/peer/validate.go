// SPDX-License-Identifier: Apache-2.0

package peer

import (
	"fmt"
	"sync"

	api "colod/nriapi"
)

// createFailed logs a failed container creation (the kubelet would see this error) and returns it.
func (rt *Runtime) createFailed(name string, err error) error {
	rt.log.Log("container-create-failed", Fields{"container": name, "error": err})
	return err
}

// validate is v0.10+'s ValidateContainerAdjustment (brief §4.9): after the merge, every plugin
// subscribed to event 14 gets the pristine container, the merged adjustment and updates, the
// per-field owners and the consulted plugins, all in parallel. A rejection or an error fails the
// creation; a validator whose connection dies is skipped, like any closed plugin.
func (rt *Runtime) validate(p *pod, pristine *api.Container, merged *api.LinuxResources,
	updates []*api.ContainerUpdate, own *owners, consulted []*plugin) error {
	var validators []*plugin
	for _, pl := range rt.livePlugins() {
		if pl.subscribed(api.Event_VALIDATE_CONTAINER_ADJUSTMENT) {
			validators = append(validators, pl)
		}
	}
	if len(validators) == 0 {
		return nil
	}
	instances := make([]*api.PluginInstance, 0, len(consulted))
	for _, pl := range consulted {
		instances = append(instances, &api.PluginInstance{Name: pl.name, Index: pl.idx})
	}
	req := &api.ValidateContainerAdjustmentRequest{
		Pod: p.proto(rt.cfg.CgroupDriver), Container: pristine,
		Adjust:  &api.ContainerAdjustment{Linux: &api.LinuxContainerAdjustment{Resources: merged}},
		Update:  updates,
		Owners:  own.proto(),
		Plugins: instances,
	}
	errs := make([]error, len(validators))
	var wg sync.WaitGroup
	for i, pl := range validators {
		wg.Add(1)
		go func(i int, pl *plugin) {
			defer wg.Done()
			resp := &api.ValidateContainerAdjustmentResponse{}
			ctx, cancel := pl.requestCtx()
			defer cancel()
			if err := pl.call(ctx, "ValidateContainerAdjustment", req, resp); err != nil {
				if !fatal(err) {
					errs[i] = fmt.Errorf("validator %q failed: %w", pl.label(), err)
				}
				return
			}
			if resp.Reject {
				rt.log.Log("validation-rejected", Fields{"plugin": pl.label(),
					"container": pristine.Name, "reason": resp.Reason})
				errs[i] = fmt.Errorf("validator %q rejected container adjustment, reason: %s",
					pl.label(), resp.Reason)
			}
		}(i, pl)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
