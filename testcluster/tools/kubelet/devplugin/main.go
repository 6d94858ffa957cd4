// tas-devplugin: a device plugin for the real-node tests. It advertises COUNT healthy
// devices of one extended resource, all on one NUMA node, so that the kubelet's Topology
// Manager gets a device hint the test chose. Allocate hands out nothing but an
// environment variable naming the devices: there is no hardware behind them.
//
// It registers with the kubelet at <dir>/kubelet.sock and serves on <dir>/<name>.sock.
// When the kubelet restarts it removes every plugin socket and recreates its own; the
// plugin notices its socket gone (or the kubelet's socket replaced) and registers again.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
	env     string
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{p.env: strings.Join(c.DevicesIds, ",")},
		})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// inode of path, 0 when it does not exist.
func inode(path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}

func register(kubeletSocket, endpoint, resource string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     endpoint,
		ResourceName: resource,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	return err
}

// serve listens on the plugin's socket, registers, and returns once the socket or the
// kubelet's socket is gone or replaced (a kubelet restart).
func serve(p *plugin, dir, endpoint, resource string) error {
	sock := filepath.Join(dir, endpoint)
	kubeletSocket := filepath.Join(dir, "kubelet.sock")
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", sock, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	kubelet := inode(kubeletSocket)
	if err := register(kubeletSocket, endpoint, resource); err != nil {
		return fmt.Errorf("registering with %s: %w", kubeletSocket, err)
	}
	log.Printf("registered %s (%d devices) at %s", resource, len(p.devices), sock)
	own := inode(sock)
	for {
		time.Sleep(200 * time.Millisecond)
		if inode(sock) != own || inode(kubeletSocket) != kubelet {
			log.Printf("the kubelet restarted: registering again")
			return nil
		}
	}
}

func main() {
	resource := flag.String("resource", "tas.dev/device", "extended resource name")
	numa := flag.Int64("numa-node", 0, "NUMA node of every device")
	count := flag.Int("count", 1, "number of devices")
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the kubelet's device-plugins directory")
	flag.Parse()

	name := (*resource)[strings.LastIndex(*resource, "/")+1:]
	p := &plugin{env: "TAS_DEVICES_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
	for i := 0; i < *count; i++ {
		p.devices = append(p.devices, &pluginapi.Device{
			ID:       fmt.Sprintf("%s-%d", name, i),
			Health:   pluginapi.Healthy,
			Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: *numa}}},
		})
	}
	endpoint := "tas-" + name + ".sock"
	for {
		if inode(filepath.Join(*dir, "kubelet.sock")) == 0 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err := serve(p, *dir, endpoint, *resource); err != nil {
			log.Printf("%v; retrying", err)
			time.Sleep(500 * time.Millisecond)
		}
	}
}
