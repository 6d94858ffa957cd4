//go:build k8s_ge_1_37

// The kubelet's Go API of v1.37 (see kubelet_v134.go): the Topology Manager, the
// admit handlers and the device manager's queries take a logger or a context too,
// hint requests name the operation (add or resize), and the podresources providers
// answer per pod as well as per container (pod-level resources in the managers).

package node

import (
	"context"
	cadvisorapi "github.com/google/cadvisor/lib/model"
	_ "unsafe" // for go:linkname

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	memorystate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
	cmqos "k8s.io/kubernetes/pkg/kubelet/cm/qos"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// The machine description types of cadvisor the kubelet's managers take (from v1.37 the
// module github.com/google/cadvisor/lib; before, cadvisor's info/v1).
type (
	machineInfo   = cadvisorapi.MachineInfo
	numaNode      = cadvisorapi.Node
	cpuCore       = cadvisorapi.Core
	hugePagesInfo = cadvisorapi.HugePagesInfo
)

func (n *Node) addContainer(pod *v1.Pod, c *v1.Container, id string) {
	n.cpu.AddContainer(klog.Background(), pod, c, id)
	n.mem.AddContainer(klog.Background(), pod, c, id)
	n.tm.AddContainer(klog.Background(), pod, c, id)
}

func (n *Node) memoryBlocks(podUID, containerName string) []memorystate.Block {
	return n.mem.GetMemory(klog.Background(), podUID, containerName)
}

func (n *Node) allocatableMemoryBlocks() []memorystate.Block {
	return n.mem.GetAllocatableMemory(klog.Background())
}

func newTopologyManager(topo []numaNode, policy, scope string, options map[string]string) (topologymanager.Manager, error) {
	return topologymanager.NewManager(klog.Background(), topo, policy, scope, options)
}

func (n *Node) admitHandlers(pod *v1.Pod) lifecycle.PodAdmitResult {
	attrs := &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: n.pods.othersThan(pod.UID), Operation: lifecycle.AddOperation}
	ctx := context.Background()
	verdict := n.tm.Admit(ctx, attrs)
	if verdict.Admit {
		verdict = n.predicate.Admit(ctx, attrs)
	}
	return verdict
}

func (n *Node) removeContainer(id string) error { return n.tm.RemoveContainer(klog.Background(), id) }

func (n *Node) removeStaleState(probe *v1.Pod, container *v1.Container) {
	n.cpu.GetTopologyHints(klog.Background(), probe, container, lifecycle.AddOperation)
	n.mem.GetTopologyHints(klog.Background(), probe, container, lifecycle.AddOperation)
	n.dev.UpdateAllocatedDevices(klog.Background())
}

func (n *Node) affinity(podUID, containerName string) topologymanager.TopologyHint {
	return n.tm.GetAffinity(klog.Background(), podUID, containerName)
}

func allocatableDevicesOf(dm *devicemanager.ManagerImpl) devicemanager.ResourceDeviceInstances {
	return dm.GetAllocatableDevices(klog.Background())
}

func (n *Node) deviceCapacity() (v1.ResourceList, v1.ResourceList, []string) {
	return n.dev.GetCapacity(klog.Background())
}

// The podresources providers whose methods differ between minors (podresources.go
// has the others). As v1.37's container manager answers: a container's CPUs and
// memory only when it holds them exclusively (not from a pod-level pool), the
// pod's pool per pod.

func (n *Node) UpdateAllocatedDevices(logger klog.Logger) { n.dev.UpdateAllocatedDevices(logger) }

func (n *Node) GetAllocatableDevices(logger klog.Logger) []*podresourcesapi.ContainerDevices {
	return containerDevicesFromResourceDeviceInstances(n.dev.GetAllocatableDevices(logger))
}

func (n *Node) GetCPUs(pod *v1.Pod, container *v1.Container) []int64 {
	if n.cpu.GetResourceIsolationLevel(pod, container) != cmqos.ResourceIsolationContainer {
		return []int64{}
	}
	return int64Slice(n.cpu.GetExclusiveCPUs(string(pod.UID), container.Name).UnsortedList())
}

func (n *Node) GetMemory(logger klog.Logger, pod *v1.Pod, container *v1.Container) []*podresourcesapi.ContainerMemory {
	if n.mem.GetResourceIsolationLevel(pod, container) != cmqos.ResourceIsolationContainer {
		return []*podresourcesapi.ContainerMemory{}
	}
	return containerMemoryFromBlock(n.mem.GetMemory(logger, string(pod.UID), container.Name))
}

func (n *Node) GetAllocatableMemory(logger klog.Logger) []*podresourcesapi.ContainerMemory {
	return containerMemoryFromBlock(n.mem.GetAllocatableMemory(logger))
}

func (n *Node) GetDynamicResources(klog.Logger, *v1.Pod, *v1.Container) []*podresourcesapi.DynamicResource {
	return noDynamicResources()
}

func (n *Node) GetPodCPUs(podUID string) []int64 {
	return int64Slice(n.cpu.GetPodCPUs(podUID).UnsortedList())
}

func (n *Node) GetPodMemory(_ klog.Logger, podUID string) []*podresourcesapi.ContainerMemory {
	return containerMemoryFromBlock(n.mem.GetPodMemory(podUID))
}
