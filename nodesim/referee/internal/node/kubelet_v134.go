//go:build !k8s_ge_1_35

// The kubelet's Go API as v1.34 has it. The calls into the managers whose
// signatures change between kubelet minors go through the functions of the
// kubelet_*.go files, one set per range of minors (build.sh sets the tags
// k8s_ge_1_35 ... k8s_ge_1_<minor>): kubelet_v134.go (v1.34), kubelet_v135.go
// (v1.35 on), kubelet_v135_v136.go, kubelet_before_v137.go (up to v1.36) and
// kubelet_v137.go (v1.37 on). What they do is the same in every version: logger
// and context parameters move, and v1.37's podresources providers answer per pod
// as well.

package node

import (
	"context"
	"time"
	_ "unsafe" // for go:linkname

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	memorystate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"
)

//go:linkname newManagerImpl k8s.io/kubernetes/pkg/kubelet/cm/devicemanager.newManagerImpl
func newManagerImpl(socketPath string, topology []numaNode, topologyAffinityStore topologymanager.Store) (*devicemanager.ManagerImpl, error)

func newDeviceManager(socketPath string, topo []numaNode, store topologymanager.Store) (*devicemanager.ManagerImpl, error) {
	return newManagerImpl(socketPath, topo, store)
}

func discoverTopology(machine *machineInfo) (*topology.CPUTopology, error) {
	return topology.Discover(machine)
}

func addHintProvider(tm topologymanager.Manager, h topologymanager.HintProvider) {
	tm.AddHintProvider(h)
}

func newCPUManager(policy string, options map[string]string, reconcile time.Duration, info *machineInfo,
	reserved cpuset.CPUSet, reservation v1.ResourceList, stateDir string, tm topologymanager.Store) (cpumanager.Manager, error) {
	return cpumanager.NewManager(policy, options, reconcile, info, reserved, reservation, stateDir, tm)
}

func newMemoryManager(ctx context.Context, policy string, info *machineInfo, reservation v1.ResourceList,
	reserved []kubeletconfig.MemoryReservation, stateDir string, tm topologymanager.Store) (memorymanager.Manager, error) {
	return memorymanager.NewManager(ctx, policy, info, reservation, reserved, stateDir, tm)
}

func (n *Node) startManagers(ctx context.Context) (string, error) {
	if err := n.cpu.Start(n.pods.active, allSourcesReady{}, noPodStatus{}, noRuntime{}, containermap.NewContainerMap()); err != nil {
		return "cpu manager", err
	}
	if err := n.mem.Start(ctx, n.pods.active, allSourcesReady{}, noPodStatus{}, noRuntime{}, containermap.NewContainerMap()); err != nil {
		return "memory manager", err
	}
	if err := n.dev.Start(n.pods.active, allSourcesReady{}, containermap.NewContainerMap(), sets.New[string]()); err != nil {
		return "device manager", err
	}
	return "", nil
}

func (n *Node) stopDeviceManager() { _ = n.dev.Stop() }

func (n *Node) newPredicateHandler() lifecycle.PodAdmitHandler {
	return lifecycle.NewPredicateAdmitHandler(func() (*v1.Node, error) { return n.object, nil },
		lifecycle.NewAdmissionFailureHandlerStub(), n.dev.UpdatePluginResources)
}

func (n *Node) addContainer(pod *v1.Pod, c *v1.Container, id string) {
	n.cpu.AddContainer(pod, c, id)
	n.mem.AddContainer(context.TODO(), pod, c, id)
	n.tm.AddContainer(pod, c, id)
}

func (n *Node) memoryBlocks(podUID, containerName string) []memorystate.Block {
	return n.mem.GetMemory(context.TODO(), podUID, containerName)
}

func (n *Node) allocatableMemoryBlocks() []memorystate.Block {
	return n.mem.GetAllocatableMemory(context.TODO())
}

// The device plugins' side of the device manager (devices.go).

func pluginConnected(dm *devicemanager.ManagerImpl, name string, p plugin.DevicePlugin) error {
	return dm.PluginConnected(name, p)
}

func pluginListAndWatch(dm *devicemanager.ManagerImpl, name string, resp *pluginapi.ListAndWatchResponse) {
	dm.PluginListAndWatchReceiver(name, resp)
}

func newStubPlugin(devs []*pluginapi.Device, socket, name string) *plugin.Stub {
	return plugin.NewDevicePluginStub(devs, socket, name, false, true)
}

func startStubPlugin(stub *plugin.Stub) error { return stub.Start() }

func stopStubPlugin(stub *plugin.Stub) { _ = stub.Stop() }

func registerStubPlugin(stub *plugin.Stub, registrationSocket, name string) error {
	return stub.Register(registrationSocket, name, "")
}
