//go:build k8s_ge_1_35

// The kubelet's Go API from v1.35 on (see kubelet_v134.go): the managers'
// constructors and Start, and the device plugins, take a logger or a context.

package node

import (
	"context"
	"time"
	_ "unsafe" // for go:linkname

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"
)

//go:linkname newManagerImpl k8s.io/kubernetes/pkg/kubelet/cm/devicemanager.newManagerImpl
func newManagerImpl(logger klog.Logger, socketPath string, topology []numaNode, topologyAffinityStore topologymanager.Store) (*devicemanager.ManagerImpl, error)

func newDeviceManager(socketPath string, topo []numaNode, store topologymanager.Store) (*devicemanager.ManagerImpl, error) {
	return newManagerImpl(klog.Background(), socketPath, topo, store)
}

func discoverTopology(machine *machineInfo) (*topology.CPUTopology, error) {
	return topology.Discover(klog.Background(), machine)
}

func addHintProvider(tm topologymanager.Manager, h topologymanager.HintProvider) {
	tm.AddHintProvider(klog.Background(), h)
}

func newCPUManager(policy string, options map[string]string, reconcile time.Duration, info *machineInfo,
	reserved cpuset.CPUSet, reservation v1.ResourceList, stateDir string, tm topologymanager.Store) (cpumanager.Manager, error) {
	return cpumanager.NewManager(klog.Background(), policy, options, reconcile, info, reserved, reservation, stateDir, tm)
}

func newMemoryManager(ctx context.Context, policy string, info *machineInfo, reservation v1.ResourceList,
	reserved []kubeletconfig.MemoryReservation, stateDir string, tm topologymanager.Store) (memorymanager.Manager, error) {
	return memorymanager.NewManager(klog.FromContext(ctx), policy, info, reservation, reserved, stateDir, tm)
}

func (n *Node) startManagers(ctx context.Context) (string, error) {
	if err := n.cpu.Start(ctx, n.pods.active, allSourcesReady{}, noPodStatus{}, noRuntime{}, containermap.NewContainerMap()); err != nil {
		return "cpu manager", err
	}
	if err := n.mem.Start(ctx, n.pods.active, allSourcesReady{}, noPodStatus{}, noRuntime{}, containermap.NewContainerMap()); err != nil {
		return "memory manager", err
	}
	if err := n.dev.Start(klog.FromContext(ctx), n.pods.active, allSourcesReady{}, containermap.NewContainerMap(), sets.New[string]()); err != nil {
		return "device manager", err
	}
	return "", nil
}

func (n *Node) stopDeviceManager() { _ = n.dev.Stop(klog.Background()) }

func (n *Node) newPredicateHandler() lifecycle.PodAdmitHandler {
	return lifecycle.NewPredicateAdmitHandler(func(context.Context, bool) (*v1.Node, error) { return n.object, nil },
		lifecycle.NewAdmissionFailureHandlerStub(), n.dev.UpdatePluginResources)
}

// The device plugins' side of the device manager (devices.go).

func pluginConnected(dm *devicemanager.ManagerImpl, name string, p plugin.DevicePlugin) error {
	return dm.PluginConnected(context.Background(), name, p)
}

func pluginListAndWatch(dm *devicemanager.ManagerImpl, name string, resp *pluginapi.ListAndWatchResponse) {
	dm.PluginListAndWatchReceiver(klog.Background(), name, resp)
}

func newStubPlugin(devs []*pluginapi.Device, socket, name string) *plugin.Stub {
	return plugin.NewDevicePluginStub(klog.Background(), devs, socket, name, false, true)
}

func startStubPlugin(stub *plugin.Stub) error { return stub.Start(context.Background()) }

func stopStubPlugin(stub *plugin.Stub) { _ = stub.Stop(klog.Background()) }

func registerStubPlugin(stub *plugin.Stub, registrationSocket, name string) error {
	return stub.Register(context.Background(), registrationSocket, name, "")
}
