package node

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Two zones of 4 SMT-2 cores (8 CPUs each), CPUs 0 and 1 reserved.
func singleNUMANodeNode(t *testing.T, scope string) (*Node, Machine) {
	m := machineSpec{zones: 2, coresPerZone: 4, threads: 2, memory: 16 * gib}.build()
	n := newNode(t, Options{Machine: m, Kubelet: kubeletJSON(t, map[string]any{
		"topologyManagerPolicy": "single-numa-node",
		"topologyManagerScope":  scope,
		"cpuManagerPolicy":      "static",
		"reservedSystemCPUs":    "0,1",
	})})
	return n, m
}

func TestSingleNUMANodeContainerScopeAdmitsWithinOneZone(t *testing.T) {
	n, m := singleNUMANodeNode(t, "container")

	res := mustAdmit(t, n, pod("fits", nil, container("app", map[string]string{"cpu": "6", "memory": "1Gi"})))
	app := res.Containers[0]
	if len(app.CPUs) != 6 {
		t.Fatalf("got CPUs %v, want 6 exclusive CPUs", app.CPUs)
	}
	zones := zonesOfCPUs(m, app.CPUs)
	if len(zones) != 1 {
		t.Fatalf("CPUs %v span zones %v, want one zone", app.CPUs, zones)
	}
	if app.Affinity == nil || !reflect.DeepEqual(app.Affinity.NUMANodes, zones) || !app.Affinity.Preferred {
		t.Fatalf("affinity %+v, want preferred %v", app.Affinity, zones)
	}
	for _, cpu := range app.CPUs {
		if cpu == 0 || cpu == 1 {
			t.Fatalf("got reserved CPU %d in %v", cpu, app.CPUs)
		}
	}
}

func TestSingleNUMANodeContainerScopeRejectsMoreThanAZone(t *testing.T) {
	n, _ := singleNUMANodeNode(t, "container")
	mustAdmit(t, n, pod("small", nil, container("app", map[string]string{"cpu": "2", "memory": "1Gi"})))
	before := n.State()

	res, err := n.Admit(pod("too-big", nil, container("app", map[string]string{"cpu": "9", "memory": "1Gi"})))
	if err != nil {
		t.Fatal(err)
	}
	if res.Admit || res.Reason != "TopologyAffinityError" || res.Message != "Resources cannot be allocated with Topology locality" {
		t.Fatalf("got %+v, want a TopologyAffinityError rejection", res)
	}
	if after := n.State(); !reflect.DeepEqual(before, after) {
		t.Fatalf("a rejected pod changed the state:\nbefore %+v\nafter  %+v", before, after)
	}
}

// Container scope allocates container by container: the init container gets
// its CPUs before the app container is refused. The rejection must still leave
// nothing behind.
func TestRejectionAfterPartialAllocationLeavesNoState(t *testing.T) {
	n, _ := singleNUMANodeNode(t, "container")
	before := n.State()

	res, err := n.Admit(pod("partial",
		[]v1.Container{container("init", map[string]string{"cpu": "4", "memory": "1Gi"})},
		container("app", map[string]string{"cpu": "9", "memory": "1Gi"})))
	if err != nil {
		t.Fatal(err)
	}
	if res.Admit || res.Reason != "TopologyAffinityError" {
		t.Fatalf("got %+v, want a TopologyAffinityError rejection", res)
	}
	if after := n.State(); !reflect.DeepEqual(before, after) {
		t.Fatalf("a rejected pod changed the state:\nbefore %+v\nafter  %+v", before, after)
	}
	// The CPUs are really free again: a pod needing all of zone 1 fits.
	mustAdmit(t, n, pod("whole-zone", nil, container("app", map[string]string{"cpu": "8", "memory": "1Gi"})))
}

// The issue's example: Topology Manager policy none, pod scope, memory manager
// Static. Three zones; only zone 0 has 1Gi hugepages (two). app0 takes one of
// them with 1Gi of zone 0's memory; app1 then fits no single zone (zone 0 lacks
// memory, the others hugepages) and no group of zones (zone 0 now holds a
// single-zone allocation, which the memory manager never mixes with a
// multi-zone one), so the memory manager refuses although the Topology Manager
// policy is none.
func TestMemoryManagerStaticRejectsUnderPolicyNone(t *testing.T) {
	res, _ := issueExample(t, []uint64{2, 0, 0})
	t.Logf("kubelet: admit=%t reason=%s message=%q", res.Admit, res.Reason, res.Message)
	if res.Admit || res.Reason != "UnexpectedAdmissionError" || !strings.Contains(res.Message, "[memorymanager]") {
		t.Fatalf("got %+v, want an UnexpectedAdmissionError from the memory manager", res)
	}
}

// The same pod is admitted when a second zone has a hugepage for app1: the
// verdict above comes from the memory state, not from the test's set-up.
func TestMemoryManagerStaticAdmitsUnderPolicyNoneWhenAZoneFits(t *testing.T) {
	res, n := issueExample(t, []uint64{2, 1, 0})
	if !res.Admit {
		t.Fatalf("got %+v, want admitted", res)
	}
	app1 := res.Containers[1]
	if len(app1.Memory) != 2 || len(app1.Memory[0].NUMANodes) != 1 {
		t.Fatalf("app1 memory %+v, want memory and hugepages from one zone", app1.Memory)
	}
	if len(app1.Devices) != 1 || len(app1.Devices[0].IDs) != 2 {
		t.Fatalf("app1 devices %+v, want 2 GPUs", app1.Devices)
	}
	if got := n.State().Pods; len(got) != 1 {
		t.Fatalf("active pods %v, want the admitted one", got)
	}
}

func issueExample(t *testing.T, hugepages []uint64) (*AdmitResult, *Node) {
	t.Helper()
	m := machineSpec{zones: 3, coresPerZone: 2, threads: 2, memory: 6 * gib, hugepages1G: hugepages, gpus: []int{0, 1, 2}}.build()
	n := newNode(t, Options{Machine: m, Kubelet: kubeletJSON(t, map[string]any{
		"topologyManagerPolicy": "none",
		"topologyManagerScope":  "pod",
		"cpuManagerPolicy":      "static",
		"reservedSystemCPUs":    "0",
		"memoryManagerPolicy":   "Static",
		"kubeReserved":          map[string]string{"memory": "412Mi"},
		"reservedMemory": []map[string]any{
			{"numaNode": 0, "limits": map[string]string{"memory": "512Mi"}},
		},
	})})
	res, err := n.Admit(pod("issue", nil,
		container("app0", map[string]string{"cpu": "1", "hugepages-1Gi": "1Gi", "memory": "1Gi"}),
		container("app1", map[string]string{"cpu": "1", "example.com/gpu": "2", "hugepages-1Gi": "1Gi", "memory": "3840Mi"})))
	if err != nil {
		t.Fatal(err)
	}
	return res, n
}

// After the Topology Manager, the kubelet's predicate handler checks the pod
// against the node: a Burstable pod gets no exclusive CPUs, so only the node's
// allocatable CPU refuses it; a node selector must match the node's labels.
func TestPredicateAdmissionAfterTheTopologyManager(t *testing.T) {
	m := machineSpec{zones: 2, coresPerZone: 2, threads: 2, memory: 8 * gib}.build()
	n := newNode(t, Options{Machine: m, Labels: map[string]string{"pool": "numa"}, Kubelet: kubeletJSON(t, map[string]any{
		"topologyManagerPolicy": "single-numa-node",
		"cpuManagerPolicy":      "static",
		"reservedSystemCPUs":    "0",
	})})
	if got := n.Resources().Allocatable["cpu"]; got.String() != "7" {
		t.Fatalf("allocatable cpu %s, want 7 (8 CPUs, 1 reserved)", got.String())
	}

	burstable := pod("burstable", nil, v1.Container{Name: "app", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{"cpu": resourceQuantity("6")},
	}})
	mustAdmit(t, n, burstable)
	res, err := n.Admit(pod("more", nil, v1.Container{Name: "app", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{"cpu": resourceQuantity("2")},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Admit || res.Reason != "OutOfcpu" {
		t.Fatalf("got %+v, want OutOfcpu", res)
	}

	elsewhere := pod("elsewhere", nil, container("app", map[string]string{"cpu": "100m"}))
	elsewhere.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	if res, _ := n.Admit(elsewhere); res == nil || res.Admit || res.Reason != "NodeAffinity" {
		t.Fatalf("got %+v, want a NodeAffinity rejection", res)
	}
	here := pod("here", nil, container("app", map[string]string{"cpu": "100m"}))
	here.Spec.NodeSelector = map[string]string{"pool": "numa"}
	mustAdmit(t, n, here)
}

// With sparse NUMA ids and prefer-closest-numa-nodes, v1.34's Topology Manager
// indexes each zone's distance row (one entry per online zone, as sysfs and
// cadvisor give it) by zone id and panics on every pod with hints. The referee
// must answer with an error, leave no state behind and keep serving.
func TestKubeletPanicBecomesAnError(t *testing.T) {
	m := machineSpec{zones: 3, coresPerZone: 2, threads: 2, memory: 8 * gib}.build()
	m.Zones[1].ID, m.Zones[2].ID = 2, 3
	n := newNode(t, Options{Machine: m, Kubelet: kubeletJSON(t, map[string]any{
		"topologyManagerPolicy":        "best-effort",
		"topologyManagerPolicyOptions": map[string]string{"prefer-closest-numa-nodes": "true"},
		"cpuManagerPolicy":             "static",
		"reservedSystemCPUs":           "0",
	})})
	before := n.State()
	if _, err := n.Admit(pod("wide", nil, container("app", map[string]string{"cpu": "6", "memory": "1Gi"}))); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("got %v, want the kubelet's panic as an error", err)
	}
	if after := n.State(); !reflect.DeepEqual(before, after) {
		t.Fatalf("the failed admission changed the state:\nbefore %+v\nafter  %+v", before, after)
	}
	// Even a one-zone pod goes through the distance comparison.
	if _, err := n.Admit(pod("narrow", nil, container("app", map[string]string{"cpu": "2", "memory": "1Gi"}))); err == nil {
		t.Fatal("a one-zone pod was admitted; has the kubelet stopped indexing distances by zone id? Update the README.")
	}
}
