// Package node is one simulated kubelet's admission machinery: the kubelet's own
// Topology Manager, CPU manager, memory manager and device manager from
// k8s.io/kubernetes, wired as the kubelet's container manager wires them, plus
// the kubelet's podresources gRPC server backed by them.
//
// Data flow for a pod: Admit adds it to the node's active pods (the kubelet adds
// a pod to its pod manager before admission), runs the Topology Manager's Admit
// (which gathers hints from the providers and calls each provider's Allocate per
// container, init containers first), then either starts its containers (the
// kubelet's PreStartContainer hooks: AddContainer on the CPU, memory and Topology
// managers) or, on rejection, drops it from the active pods and lets the
// managers' own stale-state clean-up free what it held.
package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"sync"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubefeatures "k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// Options describe one simulated node.
type Options struct {
	Name    string
	Machine Machine
	// Kubelet is a KubeletConfiguration (kubelet.config.k8s.io/v1beta1) in JSON;
	// fields left out take the kubelet's defaults.
	Kubelet json.RawMessage
	// PodResourcesDir is where the podresources socket (kubelet.sock) is served;
	// empty: not served.
	PodResourcesDir string
	// StateDir is this node's own directory for the managers' checkpoint files
	// and the device plugin registration socket. It must be empty or absent; a
	// tmpfs keeps the managers' fsyncs cheap.
	StateDir      string
	DevicePlugins DevicePlugins
	// Labels and Taints of the node's Node object, which the kubelet's predicate
	// admission handler checks pods against (node selector and affinity,
	// NoExecute taints). The kubelet's own labels (hostname, os, arch) are added.
	Labels map[string]string
	Taints []v1.Taint
}

// Node is one simulated kubelet.
type Node struct {
	name     string
	machine  Machine
	info     *machineInfo
	settings *kubeletSettings
	stateDir string

	tm  topologymanager.Manager
	cpu cpumanager.Manager
	mem memorymanager.Manager
	dev *devicemanager.ManagerImpl

	// predicate is the kubelet's predicate admission handler (node resources,
	// node name, selector and affinity, host ports, NoExecute taints), which
	// runs after the Topology Manager's.
	predicate lifecycle.PodAdmitHandler
	resources Resources
	object    *v1.Node

	pods        *podSet
	podres      *grpc.Server
	stopPlugins func()

	// mu orders admissions, removals and state reads like the kubelet's single
	// pod-admission path does.
	mu sync.Mutex
}

// maxSocketPath is the longest unix socket path Linux accepts (sun_path).
const maxSocketPath = 107

// New builds and starts a node: the managers in the container manager's order,
// its device plugins, and its podresources server.
func New(ctx context.Context, o Options) (*Node, error) {
	if err := o.Machine.validate(); err != nil {
		return nil, err
	}
	info, capacity, err := o.Machine.machineInfo()
	if err != nil {
		return nil, err
	}
	settings, err := parseKubeletConfig(o.Kubelet, info, capacity)
	if err != nil {
		return nil, err
	}
	if o.StateDir == "" {
		return nil, fmt.Errorf("node %s: no state directory", o.Name)
	}
	registration := filepath.Join(o.StateDir, "device-plugins", "kubelet.sock")
	if len(registration)+4 > maxSocketPath {
		return nil, fmt.Errorf("state directory %q is too long for unix sockets", o.StateDir)
	}
	if o.PodResourcesDir != "" && len(filepath.Join(o.PodResourcesDir, "kubelet.sock"))+4 > maxSocketPath {
		return nil, fmt.Errorf("podresources directory %q is too long for unix sockets", o.PodResourcesDir)
	}
	if err := os.MkdirAll(o.StateDir, 0o750); err != nil {
		return nil, err
	}

	n := &Node{name: o.Name, machine: o.Machine, info: info, settings: settings, stateDir: o.StateDir, pods: newPodSet()}
	ok := false
	defer func() {
		if !ok {
			n.Close()
		}
	}()
	kc := settings.config

	// pkg/kubelet/cm.NewContainerManager: Topology Manager first, then the hint
	// providers in the kubelet's order: device manager, CPU manager, memory
	// manager. The order is the order of Allocate calls at admission.
	tmOptions := kc.TopologyManagerPolicyOptions
	if !utilfeature.DefaultFeatureGate.Enabled(kubefeatures.TopologyManagerPolicyOptions) {
		if len(tmOptions) > 0 {
			return nil, fmt.Errorf("topology manager policy options %v need the feature gate %s", tmOptions, kubefeatures.TopologyManagerPolicyOptions)
		}
		tmOptions = nil
	}
	n.tm, err = newTopologyManager(info.Topology, kc.TopologyManagerPolicy, kc.TopologyManagerScope, tmOptions)
	if err != nil {
		return nil, fmt.Errorf("topology manager: %w", err)
	}
	n.dev, err = newDeviceManager(registration, info.Topology, n.tm)
	if err != nil {
		return nil, fmt.Errorf("device manager: %w", err)
	}
	addHintProvider(n.tm, n.dev)
	n.cpu, err = newCPUManager(kc.CPUManagerPolicy, kc.CPUManagerPolicyOptions, kc.CPUManagerReconcilePeriod.Duration,
		info, settings.reservedSystemCPUs, settings.nodeAllocatableReservation, o.StateDir, n.tm)
	if err != nil {
		return nil, fmt.Errorf("cpu manager: %w", err)
	}
	addHintProvider(n.tm, n.cpu)
	n.mem, err = newMemoryManager(ctx, kc.MemoryManagerPolicy, info, settings.nodeAllocatableReservation,
		kc.ReservedMemory, o.StateDir, n.tm)
	if err != nil {
		return nil, fmt.Errorf("memory manager: %w", err)
	}
	addHintProvider(n.tm, n.mem)

	if what, err := n.startManagers(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	n.stopPlugins, err = startDevicePlugins(o.DevicePlugins, n.dev, registration, o.Machine.Devices)
	if err != nil {
		return nil, err
	}
	// pkg/kubelet: the predicate handler with the critical-pod handler replaced
	// by the pass-through stub (no pod is evicted to make room), and the
	// container manager's plugin resource update (the device manager's).
	n.resources = n.computeResources()
	n.object = n.nodeObject(o.Labels, o.Taints)
	n.predicate = n.newPredicateHandler()
	if o.PodResourcesDir != "" {
		n.podres, err = n.servePodResources(ctx, filepath.Join(o.PodResourcesDir, "kubelet.sock"))
		if err != nil {
			return nil, err
		}
	}
	ok = true
	return n, nil
}

// Close stops the node's servers and plugins. The CPU manager's reconcile loop
// has no stop channel in the kubelet (it runs until the process ends), so a
// closed node leaves that one idle goroutine behind.
func (n *Node) Close() {
	if n.podres != nil {
		n.podres.Stop()
	}
	if n.stopPlugins != nil {
		n.stopPlugins()
	}
	if n.dev != nil {
		n.stopDeviceManager()
	}
}

// AdmitResult is the kubelet's verdict on a pod, and what it got if admitted.
type AdmitResult struct {
	// Admit, Reason and Message are lifecycle.PodAdmitResult as the kubelet
	// returns it (Reason e.g. TopologyAffinityError, UnexpectedAdmissionError).
	Admit   bool   `json:"admit"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Containers: what each container was allocated (init containers first), as
	// the managers hold it right after admission. Only when admitted.
	Containers []ContainerAllocation `json:"containers,omitempty"`
}

// Admit runs the kubelet's admission for a pod. A rejected pod leaves nothing
// behind; an admitted one holds its resources until Remove.
func (n *Node) Admit(pod *v1.Pod) (res *AdmitResult, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if pod.UID == "" {
		return nil, fmt.Errorf("pod %s/%s has no uid", pod.Namespace, pod.Name)
	}
	if n.pods.has(pod.UID) {
		return nil, fmt.Errorf("pod %s (%s/%s) is already on node %s", pod.UID, pod.Namespace, pod.Name, n.name)
	}
	preparePod(pod)

	// The kubelet adds the pod to its pod manager before admission, so the
	// managers' view of active pods includes it while it is allocated.
	n.pods.add(pod)
	defer func() {
		if r := recover(); r != nil {
			n.pods.remove(pod.UID)
			n.collectGarbage()
			fmt.Fprintf(os.Stderr, "kubelet code panicked admitting pod %s/%s on node %s: %v\n%s", pod.Namespace, pod.Name, n.name, r, debug.Stack())
			err = fmt.Errorf("kubelet code panicked admitting pod %s/%s: %v", pod.Namespace, pod.Name, r)
		}
	}()
	// The kubelet's admit handlers in its order; of those that can refuse a pod
	// here, the Topology Manager (which allocates) comes before the predicates.
	verdict := n.admitHandlers(pod)
	res = &AdmitResult{Admit: verdict.Admit, Reason: verdict.Reason, Message: verdict.Message}
	if !verdict.Admit {
		// kubelet.rejectPod marks the pod Failed, so it leaves the active pods;
		// what its containers got before the failure is stale state now.
		n.pods.remove(pod.UID)
		n.collectGarbage()
		return res, nil
	}
	res.Containers = n.allocations(pod)
	n.startContainers(pod)
	return res, nil
}

// startContainers runs the kubelet's PreStartContainer hook
// (internalContainerLifecycleImpl) for every container in start order. Starting
// an app container makes the memory manager release the memory of the pod's
// finished (non-restartable) init containers.
func (n *Node) startContainers(pod *v1.Pod) {
	for _, c := range allContainers(pod) {
		n.addContainer(pod, c, containerID(pod.UID, c.Name))
	}
}

// Remove deletes a pod from the node: its containers stop (the kubelet's
// PostStopContainer hook: Topology Manager RemoveContainer), it leaves the active
// pods, and the managers' clean-up frees its CPUs, memory and devices.
func (n *Node) Remove(uid types.UID) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	pod, ok := n.pods.get(uid)
	if !ok {
		return false, nil
	}
	n.pods.remove(uid)
	for _, c := range allContainers(pod) {
		if err := n.removeContainer(containerID(uid, c.Name)); err != nil {
			return true, err
		}
	}
	n.collectGarbage()
	return true, nil
}

// collectGarbage makes the managers drop the state of pods that are no longer
// active now rather than at the next admission. The kubelet does the same thing
// lazily: the CPU and memory managers remove stale state at the start of every
// hint and allocate call (removeStaleState), the device manager in
// UpdateAllocatedDevices. A hint request for a pod without guaranteed resources
// runs that clean-up and asks for nothing.
func (n *Node) collectGarbage() {
	probe := &v1.Pod{}
	probe.UID = "referee-garbage-collection"
	n.removeStaleState(probe, &v1.Container{Name: "probe"})
}

func allContainers(pod *v1.Pod) []*v1.Container {
	out := make([]*v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

func containerID(uid types.UID, name string) string {
	return string(uid) + "/" + name
}

// The Start arguments the kubelet gets from its runtime and status manager.

type allSourcesReady struct{}

func (allSourcesReady) AddSource(string) {}
func (allSourcesReady) AllReady() bool   { return true }

// noPodStatus: no container runs for real, so the CPU manager's reconcile loop
// finds no status and leaves every pod as it is.
type noPodStatus struct{}

func (noPodStatus) GetPodStatus(types.UID) (v1.PodStatus, bool) { return v1.PodStatus{}, false }

type noRuntime struct{}

func (noRuntime) UpdateContainerResources(context.Context, string, *runtimeapi.ContainerResources) error {
	return nil
}

// podSet is the node's pod manager: the active pods in admission order.
type podSet struct {
	mu    sync.RWMutex
	order []*v1.Pod
}

func newPodSet() *podSet { return &podSet{} }

func (s *podSet) active() []*v1.Pod {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]*v1.Pod(nil), s.order...)
}

func (s *podSet) othersThan(uid types.UID) []*v1.Pod {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*v1.Pod, 0, len(s.order))
	for _, p := range s.order {
		if p.UID != uid {
			out = append(out, p)
		}
	}
	return out
}

func (s *podSet) add(p *v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.order = append(s.order, p)
}

func (s *podSet) remove(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.order {
		if p.UID == uid {
			s.order = append(s.order[:i:i], s.order[i+1:]...)
			return
		}
	}
}

func (s *podSet) get(uid types.UID) (*v1.Pod, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, p := range s.order {
		if p.UID == uid {
			return p, true
		}
	}
	return nil, false
}

func (s *podSet) has(uid types.UID) bool {
	_, ok := s.get(uid)
	return ok
}

func (s *podSet) byName(namespace, name string) (*v1.Pod, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, p := range s.order {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

func (s *podSet) uids() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.order))
	for _, p := range s.order {
		out = append(out, string(p.UID))
	}
	sort.Strings(out)
	return out
}
