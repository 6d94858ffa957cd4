package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const gib = uint64(1) << 30

// machineSpec describes a test machine: zones of equal shape, CPUs numbered zone
// by zone, SMT siblings adjacent.
type machineSpec struct {
	zones        int
	coresPerZone int
	threads      int
	memory       uint64 // per zone
	hugepages1G  []uint64
	gpus         []int // NUMA zone of each device "gpu-<i>"
}

func (s machineSpec) build() Machine {
	var m Machine
	cpu := 0
	for z := 0; z < s.zones; z++ {
		zone := Zone{ID: z, Memory: s.memory}
		for c := 0; c < s.coresPerZone; c++ {
			core := Core{Socket: z}
			for t := 0; t < s.threads; t++ {
				core.CPUs = append(core.CPUs, cpu)
				cpu++
			}
			zone.Cores = append(zone.Cores, core)
		}
		if z < len(s.hugepages1G) && s.hugepages1G[z] > 0 {
			zone.Hugepages = map[string]uint64{"1Gi": s.hugepages1G[z]}
		}
		for o := 0; o < s.zones; o++ {
			d := uint64(21)
			if o == z {
				d = 10
			}
			zone.Distances = append(zone.Distances, d)
		}
		m.Zones = append(m.Zones, zone)
	}
	if len(s.gpus) > 0 {
		m.Devices = map[string][]Device{}
		for i, z := range s.gpus {
			z := z
			m.Devices["example.com/gpu"] = append(m.Devices["example.com/gpu"], Device{ID: fmt.Sprintf("gpu-%d", i), NUMA: &z})
		}
	}
	return m
}

// kubeletJSON renders a KubeletConfiguration from a map of its fields.
func kubeletJSON(t testing.TB, fields map[string]any) json.RawMessage {
	t.Helper()
	data, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// stateDir gives a node its own state directory, on tmpfs when there is one
// (the managers fsync their checkpoints).
func stateDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "referee-test-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func newNode(t testing.TB, o Options) *Node {
	t.Helper()
	if o.Name == "" {
		o.Name = "test-node"
	}
	if o.StateDir == "" {
		o.StateDir = stateDir(t)
	}
	n, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("new node: %v", err)
	}
	t.Cleanup(n.Close)
	return n
}

// container builds a container whose limits equal its requests (Guaranteed
// when every container of the pod is like this and has cpu and memory).
func container(name string, res map[string]string) v1.Container {
	rl := v1.ResourceList{}
	for k, v := range res {
		rl[v1.ResourceName(k)] = resource.MustParse(v)
	}
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Limits: rl, Requests: rl.DeepCopy()}}
}

func sidecar(name string, res map[string]string) v1.Container {
	c := container(name, res)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func pod(name string, init []v1.Container, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{InitContainers: init, Containers: containers},
	}
}

func mustAdmit(t testing.TB, n *Node, p *v1.Pod) *AdmitResult {
	t.Helper()
	res, err := n.Admit(p)
	if err != nil {
		t.Fatalf("admit %s: %v", p.Name, err)
	}
	if !res.Admit {
		t.Fatalf("admit %s: rejected: %s: %s", p.Name, res.Reason, res.Message)
	}
	return res
}

// zonesOfCPUs lists the NUMA zones the CPUs belong to.
func zonesOfCPUs(m Machine, cpus []int) []int {
	zoneOf := m.zoneOfCPU()
	set := map[int]bool{}
	for _, c := range cpus {
		set[zoneOf[c]] = true
	}
	var out []int
	for z := range set {
		out = append(out, z)
	}
	sort.Ints(out)
	return out
}

func freeCPUCount(st *State) int {
	n := 0
	for _, z := range st.Zones {
		n += len(z.FreeCPUs)
	}
	return n
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }
