// tas-dradriver: a DRA driver for the real-node tests. It publishes one ResourceSlice
// for its node with fake GPUs, GPUS_PER_NUMA_NODE on each NUMA node the node's sysfs
// lists (/sys/devices/system/node/node<N>), each carrying the standard attribute
// resource.kubernetes.io/numaNode. There is no hardware behind them: preparing a claim
// writes a CDI spec whose devices inject environment variables naming the device and
// its NUMA node, so the container the kubelet starts shows what it was given.
//
// It registers with the kubelet as a DaemonSet driver does, through the helper of
// k8s.io/dynamic-resource-allocation/kubeletplugin: a registration socket in the
// kubelet's plugins_registry directory and the DRA gRPC service (v1 and v1beta1) on
// <plugins dir>/<driver>/dra.sock. Once the kubelet has accepted the registration it
// writes the file named by --ready (so a harness waits on evidence, not on time). On
// SIGTERM or SIGINT it stops serving and deletes its ResourceSlices.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// The CDI kind of every device: vendor tas.dev, class gpu.
const (
	cdiVendor = "tas.dev"
	cdiClass  = "gpu"
	numaAttr  = "resource.kubernetes.io/numaNode"
)

// gpu is one fake device: its name in the slice and its NUMA node.
type gpu struct {
	name string
	numa int64
}

type driver struct {
	name   string
	cdiDir string
	gpus   map[string]gpu

	mu sync.Mutex
	// Which claim holds a device: a device is never prepared for two claims.
	holder map[string]types.UID
}

// numaNodes lists the NUMA nodes of the sysfs under root, in order.
func numaNodes(root string) ([]int64, error) {
	entries, err := os.ReadDir(filepath.Join(root, "devices/system/node"))
	if err != nil {
		return nil, err
	}
	var nodes []int64
	re := regexp.MustCompile(`^node([0-9]+)$`)
	for _, e := range entries {
		if m := re.FindStringSubmatch(e.Name()); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no node<N> directory under %s/devices/system/node", root)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	return nodes, nil
}

// envName is the environment variable a device injects: TAS_DRA_GPU_1 for gpu-1.
func envName(device string) string {
	return "TAS_DRA_" + strings.ToUpper(regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(device, "_"))
}

// cdiFile is the spec file of one claim.
func (d *driver) cdiFile(claim types.UID) string {
	return filepath.Join(d.cdiDir, fmt.Sprintf("%s-%s-%s.json", cdiVendor, cdiClass, claim))
}

func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		result[claim.UID] = d.prepare(claim)
	}
	return result, nil
}

func (d *driver) prepare(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	if claim.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var devices []kubeletplugin.Device
	var specDevices []map[string]any
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.name {
			continue
		}
		g, ok := d.gpus[r.Device]
		if !ok {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: device %q is not one of this driver's", claim.Namespace, claim.Name, r.Device)}
		}
		if h, held := d.holder[r.Device]; held && h != claim.UID {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: device %s is prepared for claim %s already", claim.Namespace, claim.Name, r.Device, h)}
		}
		d.holder[r.Device] = claim.UID
		// Unique per claim, so that a runtime's CDI cache never hits a stale device.
		cdiName := fmt.Sprintf("%s-%s", claim.UID, r.Device)
		env := envName(r.Device)
		specDevices = append(specDevices, map[string]any{
			"name": cdiName,
			"containerEdits": map[string]any{"env": []string{
				fmt.Sprintf("%s=%s", env, r.Device),
				fmt.Sprintf("%s_NUMA_NODE=%d", env, g.numa),
			}},
		})
		devices = append(devices, kubeletplugin.Device{
			Requests:     []string{r.Request},
			PoolName:     r.Pool,
			DeviceName:   r.Device,
			CDIDeviceIDs: []string{fmt.Sprintf("%s/%s=%s", cdiVendor, cdiClass, cdiName)},
		})
	}
	spec, err := json.Marshal(map[string]any{
		"cdiVersion": "0.6.0",
		"kind":       cdiVendor + "/" + cdiClass,
		"devices":    specDevices,
	})
	if err == nil {
		err = writeFile(d.cdiFile(claim.UID), spec)
	}
	if err != nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("writing the CDI spec of claim %s/%s: %w", claim.Namespace, claim.Name, err)}
	}
	klog.Infof("prepared claim %s/%s: %d device(s), CDI spec %s", claim.Namespace, claim.Name, len(devices), d.cdiFile(claim.UID))
	return kubeletplugin.PrepareResult{Devices: devices}
}

// writeFile writes whole or not at all: a runtime reading the directory never sees half
// a spec.
func writeFile(path string, content []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	result := make(map[types.UID]error, len(claims))
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, claim := range claims {
		err := os.Remove(d.cdiFile(claim.UID))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		for device, h := range d.holder {
			if h == claim.UID {
				delete(d.holder, device)
			}
		}
		result[claim.UID] = err
		klog.Infof("unprepared claim %s", claim.String())
	}
	return result, nil
}

func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	klog.Errorf("%s: %v", msg, err)
}

func main() {
	klog.InitFlags(nil)
	name := flag.String("driver", "gpu.tas.dev", "the driver's name (DeviceClass selectors match it)")
	node := flag.String("node", "", "the Node's name")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	sysfs := flag.String("sysfs", "/sys", "the sysfs whose NUMA nodes the GPUs are put on")
	perNode := flag.Int("gpus-per-numa-node", 1, "fake GPUs on each NUMA node")
	cdiDir := flag.String("cdi-dir", "/var/run/cdi", "where CDI specs are written (a directory the container runtime reads)")
	registry := flag.String("registry-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugin registration directory")
	plugins := flag.String("plugins-dir", kubeletplugin.KubeletPluginsDir, "where the driver's own directory (dra.sock) is made")
	ready := flag.String("ready", "", "a file written once the kubelet has registered the driver")
	flag.Parse()
	if err := run(*name, *node, *kubeconfig, *sysfs, *perNode, *cdiDir, *registry, *plugins, *ready); err != nil {
		klog.Errorf("tas-dradriver: %v", err)
		os.Exit(1)
	}
}

func run(name, node, kubeconfig, sysfs string, perNode int, cdiDir, registry, plugins, ready string) error {
	if node == "" {
		return errors.New("--node is required")
	}
	if perNode < 1 {
		return fmt.Errorf("--gpus-per-numa-node must be at least 1, not %d", perNode)
	}
	numa, err := numaNodes(sysfs)
	if err != nil {
		return fmt.Errorf("reading the NUMA nodes: %w", err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %q: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	pluginDir := filepath.Join(plugins, name)
	for _, dir := range []string{cdiDir, registry, pluginDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}

	d := &driver{name: name, cdiDir: cdiDir, gpus: map[string]gpu{}, holder: map[string]types.UID{}}
	var devices []resourceapi.Device
	for _, n := range numa {
		for i := 0; i < perNode; i++ {
			g := gpu{name: fmt.Sprintf("gpu-%d", len(devices)), numa: n}
			d.gpus[g.name] = g
			devices = append(devices, resourceapi.Device{
				Name: g.name,
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					numaAttr: {IntValue: ptr.To(n)},
				},
			})
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(name),
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(node),
		kubeletplugin.RegistrarDirectoryPath(registry),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
	)
	if err != nil {
		return fmt.Errorf("starting the kubelet plugin: %w", err)
	}
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{node: {Slices: []resourceslice.Slice{{Devices: devices}}}},
	}); err != nil {
		return fmt.Errorf("publishing the ResourceSlice: %w", err)
	}
	klog.Infof("%s on %s: %d GPU(s) on NUMA nodes %v, CDI specs in %s", name, node, len(devices), numa, cdiDir)

	// The kubelet answers the registration after it connected to dra.sock.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	registered := false
	for !registered {
		select {
		case <-ctx.Done():
			return cleanup(helper, client, name, node)
		case <-tick.C:
			if s := helper.RegistrationStatus(); s != nil {
				if !s.PluginRegistered {
					return fmt.Errorf("the kubelet refused the registration: %s", s.Error)
				}
				registered = true
			}
		}
	}
	klog.Infof("the kubelet registered %s", name)
	if ready != "" {
		if err := writeFile(ready, []byte(name+"\n")); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return cleanup(helper, client, name, node)
}

// cleanup stops serving and deletes the driver's slices of this node.
func cleanup(helper *kubeletplugin.Helper, client kubernetes.Interface, name, node string) error {
	helper.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	selector := fields.Set{"spec.nodeName": node, "spec.driver": name}.AsSelector().String()
	err := client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return fmt.Errorf("deleting the ResourceSlices of %s on %s: %w", name, node, err)
	}
	klog.Infof("stopped; the ResourceSlices of %s on %s deleted", name, node)
	return nil
}
