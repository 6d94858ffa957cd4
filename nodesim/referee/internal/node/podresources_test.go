package node

import (
	"context"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// A node with exclusive CPUs, Static memory and GPUs, serving podresources.
func podResourcesNode(t *testing.T) (*Node, podresourcesapi.PodResourcesListerClient) {
	t.Helper()
	dir := t.TempDir()
	m := machineSpec{zones: 2, coresPerZone: 4, threads: 2, memory: 16 * gib, gpus: []int{0, 0, 1, 1}}.build()
	n := newNode(t, Options{Machine: m, PodResourcesDir: dir, Kubelet: kubeletJSON(t, map[string]any{
		"topologyManagerPolicy": "single-numa-node",
		"cpuManagerPolicy":      "static",
		"reservedSystemCPUs":    "0,1",
		"memoryManagerPolicy":   "Static",
		"kubeReserved":          map[string]string{"memory": "412Mi"},
		"reservedMemory":        []map[string]any{{"numaNode": 0, "limits": map[string]string{"memory": "512Mi"}}},
	})})
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return n, podresourcesapi.NewPodResourcesListerClient(conn)
}

func rpcContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The podresources answer for one container, in the admit result's terms.
type reported struct {
	CPUs    []int
	Memory  []MemoryBlock
	Devices []DeviceAllocation
}

func fromAPI(c *podresourcesapi.ContainerResources) reported {
	r := reported{CPUs: []int{}, Memory: []MemoryBlock{}, Devices: []DeviceAllocation{}}
	for _, id := range c.CpuIds {
		r.CPUs = append(r.CPUs, int(id))
	}
	sort.Ints(r.CPUs)
	for _, m := range c.Memory {
		b := MemoryBlock{Type: m.MemoryType, Size: m.Size, NUMANodes: []int{}}
		for _, n := range m.Topology.GetNodes() {
			b.NUMANodes = append(b.NUMANodes, int(n.ID))
		}
		r.Memory = append(r.Memory, b)
	}
	sort.Slice(r.Memory, func(i, j int) bool { return r.Memory[i].Type < r.Memory[j].Type })
	byResource := map[string][]string{}
	for _, d := range c.Devices {
		byResource[d.ResourceName] = append(byResource[d.ResourceName], d.DeviceIds...)
	}
	for name, ids := range byResource {
		sort.Strings(ids)
		r.Devices = append(r.Devices, DeviceAllocation{Resource: name, IDs: ids})
	}
	return r
}

func fromAdmit(a ContainerAllocation) reported {
	r := reported{CPUs: a.CPUs, Memory: append([]MemoryBlock{}, a.Memory...), Devices: a.Devices}
	sort.Slice(r.Memory, func(i, j int) bool { return r.Memory[i].Type < r.Memory[j].Type })
	return r
}

func TestPodResourcesReportsWhatTheManagersHold(t *testing.T) {
	n, client := podResourcesNode(t)
	ctx := rpcContext(t)

	res := mustAdmit(t, n, pod("workload",
		[]v1.Container{
			container("setup", map[string]string{"cpu": "2", "memory": "1Gi"}),
			sidecar("proxy", map[string]string{"cpu": "1", "memory": "256Mi"}),
		},
		container("main", map[string]string{"cpu": "4", "memory": "2Gi", "example.com/gpu": "1"})))
	mustAdmit(t, n, pod("shared", nil, container("app", map[string]string{"cpu": "500m"})))
	rejected, err := n.Admit(pod("rejected", nil, container("app", map[string]string{"cpu": "12", "memory": "1Gi"})))
	if err != nil || rejected.Admit {
		t.Fatalf("got %+v, %v; want a rejection", rejected, err)
	}
	want := map[string]ContainerAllocation{}
	for _, c := range res.Containers {
		want[c.Name] = c
	}
	if len(want["main"].CPUs) != 4 || len(want["main"].Devices) != 1 || len(want["proxy"].CPUs) != 1 {
		t.Fatalf("unexpected allocation %+v", res.Containers)
	}

	list, err := client.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]*podresourcesapi.PodResources{}
	for _, p := range list.PodResources {
		pods[p.Name] = p
	}
	if len(pods) != 2 || pods["workload"] == nil || pods["shared"] == nil {
		t.Fatalf("List reports %v, want the two admitted pods", list.PodResources)
	}
	// The kubelet leaves regular init containers out and lists sidecars first.
	workload := pods["workload"]
	if len(workload.Containers) != 2 || workload.Containers[0].Name != "proxy" || workload.Containers[1].Name != "main" {
		t.Fatalf("List reports containers %v, want proxy and main", workload.Containers)
	}
	for _, c := range workload.Containers {
		if got, exp := fromAPI(c), fromAdmit(want[c.Name]); !reflect.DeepEqual(got, exp) {
			t.Errorf("container %s: List reports %+v, admission allocated %+v", c.Name, got, exp)
		}
	}
	if shared := pods["shared"].Containers[0]; len(shared.CpuIds) != 0 || len(shared.Memory) != 0 {
		t.Errorf("a Burstable container is reported with exclusive resources: %v", shared)
	}

	got, err := client.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: "workload", PodNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromAPI(got.PodResources.Containers[1]), fromAPI(workload.Containers[1])) {
		t.Errorf("Get and List differ: %v vs %v", got.PodResources.Containers[1], workload.Containers[1])
	}

	alloc, err := client.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(alloc.CpuIds) != 14 {
		t.Errorf("allocatable CPUs %v, want the 14 not reserved", alloc.CpuIds)
	}
	for _, id := range alloc.CpuIds {
		if id == 0 || id == 1 {
			t.Errorf("reserved CPU %d reported allocatable", id)
		}
	}
	if len(alloc.Memory) != 2 || len(alloc.Devices) != 4 {
		t.Errorf("allocatable memory %v and devices %v, want a block per zone and 4 GPUs", alloc.Memory, alloc.Devices)
	}

	if removed, err := n.Remove("uid-workload"); err != nil || !removed {
		t.Fatalf("remove: %t, %v", removed, err)
	}
	list, err = client.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.PodResources) != 1 || list.PodResources[0].Name != "shared" {
		t.Fatalf("after removal List reports %v, want only the shared pod", list.PodResources)
	}
}

// Remove gives back the CPUs, memory and devices: the managers' state equals
// the state before the pod came.
func TestRemoveFreesEverything(t *testing.T) {
	n, _ := podResourcesNode(t)
	before := n.State()
	mustAdmit(t, n, pod("workload",
		[]v1.Container{container("setup", map[string]string{"cpu": "2", "memory": "1Gi"})},
		container("main", map[string]string{"cpu": "4", "memory": "2Gi", "example.com/gpu": "2"})))
	during := n.State()
	if freeCPUCount(during) != freeCPUCount(before)-4 {
		t.Fatalf("free CPUs %d while admitted, want %d", freeCPUCount(during), freeCPUCount(before)-4)
	}
	busy := 0
	for _, d := range during.Devices["example.com/gpu"] {
		if !d.Free {
			busy++
		}
	}
	if busy != 2 {
		t.Fatalf("%d GPUs in use, want 2: %+v", busy, during.Devices)
	}
	if removed, err := n.Remove("uid-workload"); err != nil || !removed {
		t.Fatalf("remove: %t, %v", removed, err)
	}
	if after := n.State(); !reflect.DeepEqual(before, after) {
		t.Fatalf("state after removal differs:\nbefore %+v\nafter  %+v", before, after)
	}
	if removed, _ := n.Remove("uid-workload"); removed {
		t.Fatal("a second removal found the pod again")
	}
}
