package node

import (
	v1 "k8s.io/api/core/v1"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
)

// Resources is what the node's kubelet would publish in its Node status.
type Resources struct {
	Capacity    v1.ResourceList `json:"capacity"`
	Allocatable v1.ResourceList `json:"allocatable"`
	// Reserved: the container manager's node allocatable reservation
	// (system-reserved + kube-reserved + hard eviction thresholds).
	Reserved v1.ResourceList `json:"reserved"`
}

// Resources computes capacity and allocatable with the rules of the kubelet's
// node status setter (pkg/kubelet/nodestatus.MachineInfo, whose package pulls in
// the whole container manager): capacity from the machine plus the device
// plugins' devices; allocatable = capacity − reservation, never negative, with
// the devices the device manager counts as healthy, and with memory further
// reduced by every hugepage size's capacity. The pods count is left to the caller
// (it is the kubelet's maxPods).
func (n *Node) Resources() Resources {
	_, capacity, _ := n.machine.machineInfo()
	devCapacity, devAllocatable, _ := n.dev.GetCapacity()
	for name, q := range devCapacity {
		capacity[name] = q
	}
	reserved := n.settings.nodeAllocatableReservation
	allocatable := v1.ResourceList{}
	for name, q := range capacity {
		left := q.DeepCopy()
		if r, ok := reserved[name]; ok {
			left.Sub(r)
		}
		if left.Sign() < 0 {
			left.Set(0)
		}
		allocatable[name] = left
	}
	for name, q := range devAllocatable {
		allocatable[name] = q
	}
	memory := allocatable[v1.ResourceMemory]
	for name, q := range capacity {
		if v1helper.IsHugePageResourceName(name) {
			memory.Sub(q)
		}
	}
	if memory.Sign() < 0 {
		memory.Set(0)
	}
	allocatable[v1.ResourceMemory] = memory
	return Resources{Capacity: capacity, Allocatable: allocatable, Reserved: reserved}
}
