package node

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	criutil "k8s.io/cri-client/pkg/util"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesapiv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	kubefeatures "k8s.io/kubernetes/pkg/features"
	apisgrpc "k8s.io/kubernetes/pkg/kubelet/apis/grpc"
	"k8s.io/kubernetes/pkg/kubelet/apis/podresources"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	memorystate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
)

// servePodResources serves the kubelet's podresources API for this node on
// <dir>/kubelet.sock, wired as pkg/kubelet/server.ListenAndServePodResources does:
// the same rate limit, the v1alpha1 and v1 servers, the same listener helper.
// The providers are the node's managers and its set of active pods, like the
// kubelet's container manager and pod manager.
func (n *Node) servePodResources(ctx context.Context, socket string) (*grpc.Server, error) {
	providers := podresources.PodResourcesProviders{
		Pods:             n,
		Devices:          n,
		Cpus:             n,
		Memory:           n,
		DynamicResources: n,
	}
	server := grpc.NewServer(apisgrpc.WithRateLimiter(ctx, "podresources", podresources.DefaultQPS, podresources.DefaultBurstTokens))
	podresourcesapiv1alpha1.RegisterPodResourcesListerServer(server, podresources.NewV1alpha1PodResourcesServer(providers))
	podresourcesapi.RegisterPodResourcesListerServer(server, podresources.NewV1PodResourcesServer(ctx, providers))
	l, err := criutil.CreateListener("unix://" + socket)
	if err != nil {
		return nil, fmt.Errorf("podresources socket: %w", err)
	}
	go func() { _ = server.Serve(l) }()
	return server, nil
}

// PodsProvider: the kubelet's pod manager view. Rejected and removed pods are not
// active; the kubelet filters terminal pods out of GetActivePods the same way.

func (n *Node) GetActivePods() []*v1.Pod { return n.pods.active() }
func (n *Node) GetPods() []*v1.Pod       { return n.pods.active() }
func (n *Node) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	return n.pods.byName(namespace, name)
}

// DevicesProvider, CPUsProvider, MemoryProvider, DynamicResourcesProvider: what
// the kubelet's container manager (pkg/kubelet/cm) answers, from the same managers
// (the methods whose signatures differ between minors are in kubelet_v1*.go).

func (n *Node) GetDevices(podUID, containerName string) []*podresourcesapi.ContainerDevices {
	return containerDevicesFromResourceDeviceInstances(n.dev.GetDevices(podUID, containerName))
}

func (n *Node) GetAllocatableCPUs() []int64 {
	return int64Slice(n.cpu.GetAllocatableCPUs().UnsortedList())
}

// noDynamicResources is GetDynamicResources' answer: the simulated nodes have no
// DRA drivers, so no pod has prepared claims; the container manager answers an
// empty list then.
func noDynamicResources() []*podresourcesapi.DynamicResource {
	if !utilfeature.DefaultFeatureGate.Enabled(kubefeatures.DynamicResourceAllocation) {
		return []*podresourcesapi.DynamicResource{}
	}
	return nil
}

// The conversions below turn manager types into podresources messages with the
// same result as pkg/kubelet/cm's unexported helpers (that package cannot be
// imported without the kubelet's cgroup and cadvisor machinery): one
// ContainerDevices per device and NUMA node (none for a device without
// topology), one ContainerMemory per memory block with all its NUMA nodes.

func int64Slice(ids []int) []int64 {
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		out = append(out, int64(id))
	}
	return out
}

func containerDevicesFromResourceDeviceInstances(instances devicemanager.ResourceDeviceInstances) []*podresourcesapi.ContainerDevices {
	var out []*podresourcesapi.ContainerDevices
	for name, byID := range instances {
		for id, dev := range byID {
			entry := func(topology *podresourcesapi.TopologyInfo) *podresourcesapi.ContainerDevices {
				return &podresourcesapi.ContainerDevices{ResourceName: name, DeviceIds: []string{id}, Topology: topology}
			}
			if dev.GetTopology() == nil {
				out = append(out, entry(nil))
				continue
			}
			for _, numa := range dev.GetTopology().GetNodes() {
				out = append(out, entry(&podresourcesapi.TopologyInfo{Nodes: []*podresourcesapi.NUMANode{{ID: numa.GetID()}}}))
			}
		}
	}
	return out
}

func containerMemoryFromBlock(blocks []memorystate.Block) []*podresourcesapi.ContainerMemory {
	var out []*podresourcesapi.ContainerMemory
	for _, block := range blocks {
		nodes := make([]*podresourcesapi.NUMANode, 0, len(block.NUMAAffinity))
		for _, id := range block.NUMAAffinity {
			nodes = append(nodes, &podresourcesapi.NUMANode{ID: int64(id)})
		}
		out = append(out, &podresourcesapi.ContainerMemory{
			MemoryType: string(block.Type),
			Size:       block.Size,
			Topology:   &podresourcesapi.TopologyInfo{Nodes: nodes},
		})
	}
	return out
}
