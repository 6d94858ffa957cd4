package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	resourcedefaults "k8s.io/kubernetes/pkg/apis/resource/v1"
	strictjson "sigs.k8s.io/json"
)

// features is what the DynamicResources plugin passes to structured.NewAllocator
// under kube-scheduler v1.34's default feature gates (pkg/features in
// k8s.io/kubernetes v1.34.4).
var features = structured.Features{
	AdminAccess:     true, // DRAAdminAccess: beta, on
	PrioritizedList: true, // DRAPrioritizedList: beta, on
	DeviceStatus:    true, // DRAResourceClaimDeviceStatus: beta, on
	// Alpha in 1.34, off: DRAPartitionableDevices, DRADeviceTaints,
	// DRADeviceBindingConditions, DRAConsumableCapacity.
	PartitionableDevices: false,
	DeviceTaints:         false,
	DeviceBinding:        false,
	ConsumableCapacity:   false,
}

// celCacheSize is the plugin's: the 10 most recently used expressions stay compiled.
const celCacheSize = 10

// request is one case: claims to allocate together (as for one pod) on node.
type request struct {
	ID        json.RawMessage              `json:"id,omitempty"`
	Node      *corev1.Node                 `json:"node"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	Allocated []*resourceapi.ResourceClaim `json:"allocated"`
}

type allocated struct {
	ID          json.RawMessage                `json:"id,omitempty"`
	OK          bool                           `json:"ok"`
	Allocations []resourceapi.AllocationResult `json:"allocations"`
}

type refused struct {
	ID            json.RawMessage `json:"id,omitempty"`
	OK            bool            `json:"ok"`
	Unschedulable bool            `json:"unschedulable"`
	Error         string          `json:"error,omitempty"`
}

// verdict is the outcome of one request before it is written.
type verdict struct {
	allocations   []resourceapi.AllocationResult
	unschedulable bool
	err           error
}

type referee struct {
	timeout  time.Duration
	celCache *cel.Cache
}

func newReferee(timeout time.Duration) *referee {
	return &referee{
		timeout: timeout,
		// As the plugin builds its cache; consumable capacity is off.
		celCache: cel.NewCache(celCacheSize, cel.Features{EnableConsumableCapacity: features.ConsumableCapacity}),
	}
}

// answer decides one request line and renders its response line.
func (ref *referee) answer(line []byte) []byte {
	var req request
	var v verdict
	strict, err := strictjson.UnmarshalStrict(line, &req, strictjson.DisallowUnknownFields, strictjson.DisallowDuplicateFields)
	switch {
	case err != nil:
		v.err = fmt.Errorf("bad request: %w", err)
	case len(strict) > 0:
		v.err = fmt.Errorf("bad request: %w", errors.Join(strict...))
	default:
		v = ref.decide(&req)
	}
	var out any
	switch {
	case v.err != nil:
		out = refused{ID: req.ID, Error: v.err.Error()}
	case v.unschedulable:
		out = refused{ID: req.ID, Unschedulable: true}
	default:
		out = allocated{ID: req.ID, OK: true, Allocations: v.allocations}
	}
	rendered, err := json.Marshal(out)
	if err != nil {
		rendered, _ = json.Marshal(refused{ID: req.ID, Error: fmt.Sprintf("encoding the response: %v", err)})
	}
	return rendered
}

// decide runs the plugin's steps for one pod on one node: PreFilter's class check,
// the allocated-devices set, NewAllocator, then Filter's Allocate under a time limit.
func (ref *referee) decide(req *request) (v verdict) {
	defer func() {
		if p := recover(); p != nil {
			klog.ErrorS(nil, "allocator panicked", "panic", p, "stack", string(debug.Stack()))
			v = verdict{err: fmt.Errorf("allocator panicked: %v", p)}
		}
	}()
	if req.Node == nil {
		return verdict{err: errors.New("bad request: no node")}
	}
	for i, claim := range req.Claims {
		if claim == nil {
			return verdict{err: fmt.Errorf("bad request: claims[%d] is null", i)}
		}
		if claim.Status.Allocation != nil {
			return verdict{err: fmt.Errorf("bad request: claims[%d] (%s) is already allocated; list it in allocated", i, klog.KObj(claim))}
		}
	}
	classes, err := newClassLister(req.Classes)
	if err != nil {
		return verdict{err: fmt.Errorf("bad request: %w", err)}
	}
	// What the API server would have stored: claims and slices with its defaults.
	for _, claim := range req.Claims {
		resourcedefaults.SetObjectDefaults_ResourceClaim(claim)
	}
	for _, slice := range req.Slices {
		if slice != nil {
			resourcedefaults.SetObjectDefaults_ResourceSlice(slice)
		}
	}

	if reason, err := checkRequests(req.Claims, classes); err != nil {
		return verdict{err: err}
	} else if reason != "" {
		klog.V(2).InfoS("unschedulable before allocation", "reason", reason)
		return verdict{unschedulable: true}
	}

	state := allocatedState(req.Allocated)
	ctx := context.Background()
	allocator, err := structured.NewAllocator(ctx, features, state, classes, nonNil(req.Slices), ref.celCache)
	if err != nil {
		return verdict{err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, ref.timeout)
	defer cancel()
	results, err := allocator.Allocate(ctx, req.Node, req.Claims)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		// The plugin's Filter calls this node unschedulable ("timed out trying to
		// allocate devices"); reported as an error here so a test notices.
		return verdict{err: fmt.Errorf("timed out after %v trying to allocate devices: %w", ref.timeout, err)}
	case err != nil:
		return verdict{err: err}
	case len(results) != len(req.Claims):
		// nil: no allocation exists (all or nothing).
		return verdict{unschedulable: true}
	}
	if results == nil {
		results = []resourceapi.AllocationResult{}
	}
	return verdict{allocations: results}
}

func nonNil(slices []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, 0, len(slices))
	for _, s := range slices {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}
