package node

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"
	_ "unsafe" // for go:linkname

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
)

// newDeviceManager (kubelet_v1*.go: the parameters differ between minors) calls
// the device manager's own constructor with the registration
// socket path as a parameter (devicemanager.newManagerImpl, the one the package's
// tests use). The exported NewManagerImpl hard-wires the kubelet's path
// (/var/lib/kubelet/device-plugins/kubelet.sock) and keeps its checkpoint next to
// it, so many simulated nodes in one process could not each have their own.
// Linking to the unexported function keeps the real manager, unchanged, with one
// directory per node.

// DevicePlugins says how a node's devices reach its device manager.
type DevicePlugins string

const (
	// InProcessPlugins (the default) connects one in-process plugin per resource
	// straight to the manager's plugin handler (PluginConnected +
	// PluginListAndWatchReceiver, what the manager's gRPC client does after a
	// plugin registers). Cheap enough for hundreds of nodes.
	InProcessPlugins DevicePlugins = "in-process"
	// StubPlugins runs the kubelet's own stub device plugin
	// (devicemanager/plugin/v1beta1.Stub) per resource on a unix socket and
	// registers it over the real registration gRPC API. Each stub holds an
	// inotify instance (its kubelet-restart watcher), and a user has 128 of those
	// by default, so this mode is for a handful of nodes.
	StubPlugins DevicePlugins = "stub"
)

// pluginDevices turns the machine's devices of one resource into what a device
// plugin advertises: every device healthy, with its NUMA node when it has one.
func pluginDevices(devs []Device) []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(devs))
	for _, d := range devs {
		pd := &pluginapi.Device{ID: d.ID, Health: pluginapi.Healthy}
		if d.NUMA != nil {
			pd.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(*d.NUMA)}}}
		}
		out = append(out, pd)
	}
	return out
}

// allocateResponse answers an Allocate request as a device plugin that needs no
// environment, mounts or device nodes: one empty response per container request.
// (The stub's default answer has no container responses, which the manager
// rejects as "no containers return in allocation response".)
func allocateResponse(r *pluginapi.AllocateRequest) *pluginapi.AllocateResponse {
	resp := &pluginapi.AllocateResponse{}
	for range r.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{})
	}
	return resp
}

// preferredAllocation is the plugins' GetPreferredAllocation: the devices that
// must be included, then the lowest ids (string order) of the available ones.
// Without a preference the device manager picks among equally aligned devices
// in map order, that is at random; a preference makes runs reproducible.
func preferredAllocation(r *pluginapi.PreferredAllocationRequest) *pluginapi.PreferredAllocationResponse {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, req := range r.ContainerRequests {
		chosen := append([]string(nil), req.MustIncludeDeviceIDs...)
		taken := map[string]bool{}
		for _, id := range chosen {
			taken[id] = true
		}
		available := append([]string(nil), req.AvailableDeviceIDs...)
		sort.Strings(available)
		for _, id := range available {
			if len(chosen) >= int(req.AllocationSize) {
				break
			}
			if !taken[id] {
				chosen = append(chosen, id)
				taken[id] = true
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: chosen})
	}
	return resp
}

// startDevicePlugins connects a plugin per resource of the machine to the device
// manager and waits until the manager lists every device as allocatable. It
// returns a function that stops the plugins.
func startDevicePlugins(mode DevicePlugins, dm *devicemanager.ManagerImpl, registrationSocket string, devices map[string][]Device) (func(), error) {
	names := make([]string, 0, len(devices))
	for name := range devices {
		names = append(names, name)
	}
	sort.Strings(names)
	var stops []func()
	stopAll := func() {
		for _, s := range stops {
			s()
		}
	}
	for i, name := range names {
		devs := pluginDevices(devices[name])
		switch mode {
		case InProcessPlugins, "":
			p := &inProcessPlugin{resource: name}
			if err := pluginConnected(dm, name, p); err != nil {
				stopAll()
				return nil, fmt.Errorf("device plugin %s: %w", name, err)
			}
			pluginListAndWatch(dm, name, &pluginapi.ListAndWatchResponse{Devices: devs})
		case StubPlugins:
			socket := filepath.Join(filepath.Dir(registrationSocket), fmt.Sprintf("plugin-%d.sock", i))
			stub := newStubPlugin(devs, socket, name)
			stub.SetAllocFunc(func(r *pluginapi.AllocateRequest, _ map[string]*pluginapi.Device) (*pluginapi.AllocateResponse, error) {
				return allocateResponse(r), nil
			})
			stub.SetGetPreferredAllocFunc(func(r *pluginapi.PreferredAllocationRequest, _ map[string]*pluginapi.Device) (*pluginapi.PreferredAllocationResponse, error) {
				return preferredAllocation(r), nil
			})
			if err := startStubPlugin(stub); err != nil {
				stopAll()
				return nil, fmt.Errorf("device plugin %s: %w", name, err)
			}
			stops = append(stops, func() { stopStubPlugin(stub) })
			if err := registerStubPlugin(stub, registrationSocket, name); err != nil {
				stopAll()
				return nil, fmt.Errorf("device plugin %s: register: %w", name, err)
			}
		default:
			return nil, fmt.Errorf("unknown devicePlugins mode %q (want %q or %q)", mode, InProcessPlugins, StubPlugins)
		}
	}
	// Registration and ListAndWatch run asynchronously over gRPC in stub mode.
	deadline := time.Now().Add(10 * time.Second)
	for {
		allocatable := allocatableDevicesOf(dm)
		var missing []string
		for _, name := range names {
			if len(allocatable[name]) != len(devices[name]) {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			return stopAll, nil
		}
		if time.Now().After(deadline) {
			stopAll()
			return nil, fmt.Errorf("device manager did not list the devices of %s", strings.Join(missing, ", "))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// inProcessPlugin is a device plugin the manager talks to without a socket. It
// stands in for the plugin side only (the kubelet's stub cannot be used for
// hundreds of nodes, see StubPlugins); everything the kubelet decides stays in
// the real device manager.
type inProcessPlugin struct {
	resource string
}

func (p *inProcessPlugin) API() pluginapi.DevicePluginClient { return inProcessClient{} }
func (p *inProcessPlugin) Resource() string                  { return p.resource }
func (p *inProcessPlugin) SocketPath() string                { return "" }

type inProcessClient struct{}

func (inProcessClient) GetDevicePluginOptions(context.Context, *pluginapi.Empty, ...grpc.CallOption) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

func (inProcessClient) ListAndWatch(context.Context, *pluginapi.Empty, ...grpc.CallOption) (grpc.ServerStreamingClient[pluginapi.ListAndWatchResponse], error) {
	return nil, fmt.Errorf("in-process device plugins push their devices once, at connection")
}

func (inProcessClient) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest, _ ...grpc.CallOption) (*pluginapi.PreferredAllocationResponse, error) {
	return preferredAllocation(r), nil
}

func (inProcessClient) Allocate(_ context.Context, r *pluginapi.AllocateRequest, _ ...grpc.CallOption) (*pluginapi.AllocateResponse, error) {
	return allocateResponse(r), nil
}

func (inProcessClient) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest, ...grpc.CallOption) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
