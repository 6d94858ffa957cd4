package node

import (
	"runtime"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Resources is what the node publishes: see computeResources.
func (n *Node) Resources() Resources { return n.resources }

// computeResources derives capacity and allocatable with the rules of the
// kubelet's node status setter (pkg/kubelet/nodestatus.MachineInfo, whose package
// pulls in the whole container manager): capacity from the machine, the kubelet's
// maxPods and the device plugins' devices; allocatable = capacity − reservation,
// never negative, with the devices the device manager counts as healthy, and
// with memory further reduced by every hugepage size's capacity.
func (n *Node) computeResources() Resources {
	_, capacity, _ := n.machine.machineInfo()
	capacity[v1.ResourcePods] = *resource.NewQuantity(int64(n.settings.config.MaxPods), resource.DecimalSI)
	devCapacity, devAllocatable, _ := n.deviceCapacity()
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

// nodeObject is the Node the kubelet's predicate admission handler checks pods
// against: the kubelet's own labels (hostname, os, arch) plus the configured
// ones, the configured taints, and the node's capacity and allocatable.
func (n *Node) nodeObject(labels map[string]string, taints []v1.Taint) *v1.Node {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{
		v1.LabelHostname:   n.name,
		v1.LabelOSStable:   runtime.GOOS,
		v1.LabelArchStable: runtime.GOARCH,
	}}}
	for k, v := range labels {
		node.Labels[k] = v
	}
	node.Spec.Taints = taints
	node.Status.Capacity = n.resources.Capacity
	node.Status.Allocatable = n.resources.Allocatable
	return node
}
