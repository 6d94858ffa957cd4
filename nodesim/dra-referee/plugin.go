package main

// What kube-scheduler's DynamicResources plugin (pkg/scheduler/framework/plugins/
// dynamicresources in k8s.io/kubernetes v1.34.4) does around the allocator, restated
// rather than imported: that package pulls in the whole scheduler framework. Each
// function names the code it follows.

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// checkRequests is PreFilter's check of the claims to allocate: every request names
// classes that exist. A missing class or an unknown request type makes the pod
// unschedulable (the reason is returned); an empty class name is an error.
func checkRequests(claims []*resourceapi.ResourceClaim, classes *classLister) (string, error) {
	for _, claim := range claims {
		for _, request := range claim.Spec.Devices.Requests {
			switch {
			case request.Exactly != nil:
				if reason, err := checkClass(classes, request.Exactly.DeviceClassName, request.Name); reason != "" || err != nil {
					return reason, err
				}
			case len(request.FirstAvailable) > 0:
				// DRAPrioritizedList is on, so subrequests are accepted.
				for _, sub := range request.FirstAvailable {
					name := strings.Join([]string{request.Name, sub.Name}, "/")
					if reason, err := checkClass(classes, sub.DeviceClassName, name); reason != "" || err != nil {
						return reason, err
					}
				}
			default:
				return fmt.Sprintf("resource claim %s, request %s: unknown request type", klog.KObj(claim), request.Name), nil
			}
		}
	}
	return "", nil
}

// checkClass is the plugin's validateDeviceClass.
func checkClass(classes *classLister, className, requestName string) (string, error) {
	if className == "" {
		return "", fmt.Errorf("request %s: unsupported request type", requestName)
	}
	if _, err := classes.Get(className); apierrors.IsNotFound(err) {
		return fmt.Sprintf("request %s: device class %s does not exist", requestName, className), nil
	}
	return "", nil
}

// allocatedState is the set of devices in use, as the plugin's allocatedDevices
// tracker builds it from the allocated claims (foreachAllocatedDevice) when
// DRAConsumableCapacity is off: every device of every allocation result except those
// allocated with admin access, which do not take the device.
func allocatedState(claims []*resourceapi.ResourceClaim) structured.AllocatedState {
	ids := sets.New[structured.DeviceID]()
	for _, claim := range claims {
		if claim == nil || claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if ptr.Deref(result.AdminAccess, false) {
				continue
			}
			ids.Insert(structured.MakeDeviceID(result.Driver, result.Pool, result.Device))
		}
	}
	return structured.AllocatedState{
		AllocatedDevices:         ids,
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
}

// classLister serves the request's DeviceClasses as the scheduler's lister would,
// with a NotFound error for a missing one.
type classLister struct {
	byName map[string]*resourceapi.DeviceClass
}

var _ structured.DeviceClassLister = (*classLister)(nil)

func newClassLister(classes []*resourceapi.DeviceClass) (*classLister, error) {
	l := &classLister{byName: make(map[string]*resourceapi.DeviceClass, len(classes))}
	for i, class := range classes {
		if class == nil || class.Name == "" {
			return nil, fmt.Errorf("classes[%d] has no name", i)
		}
		if _, dup := l.byName[class.Name]; dup {
			return nil, fmt.Errorf("two device classes named %s", class.Name)
		}
		l.byName[class.Name] = class
	}
	return l, nil
}

func (l *classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l.byName))
	for _, class := range l.byName {
		out = append(out, class)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (l *classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if class, ok := l.byName[name]; ok {
		return class, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}
