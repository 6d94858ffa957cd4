//go:build !k8s_ge_1_37

// The kubelet's Go API up to v1.36 where v1.37 differs (see kubelet_v134.go).

package node

import (
	cadvisorapi "github.com/google/cadvisor/info/v1"
	_ "unsafe" // for go:linkname

	v1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// The machine description types of cadvisor the kubelet's managers take.
type (
	machineInfo   = cadvisorapi.MachineInfo
	numaNode      = cadvisorapi.Node
	cpuCore       = cadvisorapi.Core
	hugePagesInfo = cadvisorapi.HugePagesInfo
)

func newTopologyManager(topo []numaNode, policy, scope string, options map[string]string) (topologymanager.Manager, error) {
	return topologymanager.NewManager(topo, policy, scope, options)
}

func (n *Node) admitHandlers(pod *v1.Pod) lifecycle.PodAdmitResult {
	attrs := &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: n.pods.othersThan(pod.UID)}
	verdict := n.tm.Admit(attrs)
	if verdict.Admit {
		verdict = n.predicate.Admit(attrs)
	}
	return verdict
}

func (n *Node) removeContainer(id string) error { return n.tm.RemoveContainer(id) }

func (n *Node) removeStaleState(probe *v1.Pod, container *v1.Container) {
	n.cpu.GetTopologyHints(probe, container)
	n.mem.GetTopologyHints(probe, container)
	n.dev.UpdateAllocatedDevices()
}

func (n *Node) affinity(podUID, containerName string) topologymanager.TopologyHint {
	return n.tm.GetAffinity(podUID, containerName)
}

func allocatableDevicesOf(dm *devicemanager.ManagerImpl) devicemanager.ResourceDeviceInstances {
	return dm.GetAllocatableDevices()
}

func (n *Node) deviceCapacity() (v1.ResourceList, v1.ResourceList, []string) {
	return n.dev.GetCapacity()
}

// The podresources providers whose methods differ between minors (podresources.go
// has the others).

func (n *Node) UpdateAllocatedDevices() { n.dev.UpdateAllocatedDevices() }

func (n *Node) GetAllocatableDevices() []*podresourcesapi.ContainerDevices {
	return containerDevicesFromResourceDeviceInstances(n.dev.GetAllocatableDevices())
}

func (n *Node) GetCPUs(podUID, containerName string) []int64 {
	return int64Slice(n.cpu.GetExclusiveCPUs(podUID, containerName).UnsortedList())
}

func (n *Node) GetMemory(podUID, containerName string) []*podresourcesapi.ContainerMemory {
	return containerMemoryFromBlock(n.memoryBlocks(podUID, containerName))
}

func (n *Node) GetAllocatableMemory() []*podresourcesapi.ContainerMemory {
	return containerMemoryFromBlock(n.allocatableMemoryBlocks())
}

func (n *Node) GetDynamicResources(*v1.Pod, *v1.Container) []*podresourcesapi.DynamicResource {
	return noDynamicResources()
}
