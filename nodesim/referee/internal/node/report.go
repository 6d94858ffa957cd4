package node

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/utils/cpuset"
)

// preparePod gives a pod what the API server gives it before a kubelet sees it:
// the core/v1 defaults (requests default to limits, ...) and its QoS class.
func preparePod(pod *v1.Pod) {
	corev1defaults.SetObjectDefaults_Pod(pod)
	if pod.Status.QOSClass == "" {
		pod.Status.QOSClass = qos.ComputePodQOS(pod)
	}
}

// Hint is a Topology Manager hint: NUMA nodes (nil: any) and whether preferred.
type Hint struct {
	NUMANodes []int `json:"numaNodes"`
	Preferred bool  `json:"preferred"`
}

// ContainerAllocation is what one container holds.
type ContainerAllocation struct {
	Name string `json:"name"`
	// Kind: init, sidecar (restartable init container) or app.
	Kind string `json:"kind"`
	// Affinity is the hint the Topology Manager stored for the container (nil
	// under policy none, which stores none).
	Affinity *Hint `json:"affinity"`
	// CPUs: the container's exclusive CPUs (empty in the shared pool).
	CPUs    []int              `json:"cpus"`
	Memory  []MemoryBlock      `json:"memory"`
	Devices []DeviceAllocation `json:"devices"`
}

// MemoryBlock is one memory manager block: a memory type (memory,
// hugepages-<size>), its size in bytes and the NUMA nodes it comes from.
type MemoryBlock struct {
	Type      string `json:"type"`
	Size      uint64 `json:"size"`
	NUMANodes []int  `json:"numaNodes"`
}

// DeviceAllocation lists the devices of one resource a container got.
type DeviceAllocation struct {
	Resource string   `json:"resource"`
	IDs      []string `json:"ids"`
}

func (n *Node) allocations(pod *v1.Pod) []ContainerAllocation {
	uid := string(pod.UID)
	var out []ContainerAllocation
	for i, c := range allContainers(pod) {
		kind := "app"
		if i < len(pod.Spec.InitContainers) {
			kind = "init"
			if podutil.IsRestartableInitContainer(c) {
				kind = "sidecar"
			}
		}
		a := ContainerAllocation{Name: c.Name, Kind: kind, CPUs: []int{}, Memory: []MemoryBlock{}, Devices: []DeviceAllocation{}}
		if n.settings.config.TopologyManagerPolicy != "none" {
			h := n.affinity(uid, c.Name)
			a.Affinity = &Hint{Preferred: h.Preferred}
			if h.NUMANodeAffinity != nil {
				a.Affinity.NUMANodes = h.NUMANodeAffinity.GetBits()
			}
		}
		a.CPUs = n.cpu.GetExclusiveCPUs(uid, c.Name).List()
		for _, b := range n.memoryBlocks(uid, c.Name) {
			nodes := append([]int{}, b.NUMAAffinity...)
			sort.Ints(nodes)
			a.Memory = append(a.Memory, MemoryBlock{Type: string(b.Type), Size: b.Size, NUMANodes: nodes})
		}
		for resource, devs := range n.dev.GetDevices(uid, c.Name) {
			d := DeviceAllocation{Resource: resource}
			for id := range devs {
				d.IDs = append(d.IDs, id)
			}
			sort.Strings(d.IDs)
			a.Devices = append(a.Devices, d)
		}
		sort.Slice(a.Devices, func(i, j int) bool { return a.Devices[i].Resource < a.Devices[j].Resource })
		out = append(out, a)
	}
	return out
}

// State is the managers' own view of a node: what is free, per zone and device.
type State struct {
	Zones   []ZoneState              `json:"zones"`
	Devices map[string][]DeviceState `json:"devices"`
	// Pods: uids of the active (admitted, not removed) pods.
	Pods []string `json:"pods"`
}

// ZoneState is one NUMA zone as the CPU and memory managers hold it.
type ZoneState struct {
	ID int `json:"id"`
	// CPUs the CPU manager may hand out exclusively (the static policy's
	// allocatable CPUs: all but the reserved ones; none under policy none) and
	// those of them still free (in the shared pool).
	AllocatableCPUs []int `json:"allocatableCPUs"`
	FreeCPUs        []int `json:"freeCPUs"`
	// Memory per type (memory, hugepages-<size>) from the memory manager's
	// machine state; empty under policy None.
	Memory map[string]MemoryState `json:"memory"`
	// Cells: the zones this zone is grouped with by multi-NUMA allocations
	// (just itself when none spans it); Assignments: containers holding
	// memory here. Both from the memory manager's machine state.
	Cells       []int `json:"cells,omitempty"`
	Assignments int   `json:"assignments"`
}

// MemoryState is the memory manager's MemoryTable of one type in one zone, bytes.
type MemoryState struct {
	Total          uint64 `json:"total"`
	SystemReserved uint64 `json:"systemReserved"`
	Allocatable    uint64 `json:"allocatable"`
	Reserved       uint64 `json:"reserved"`
	Free           uint64 `json:"free"`
}

// DeviceState is one device as the device manager holds it.
type DeviceState struct {
	ID        string `json:"id"`
	NUMANodes []int  `json:"numaNodes"`
	Free      bool   `json:"free"`
}

// State reports the managers' state.
func (n *Node) State() *State {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.collectGarbage()

	allocatable := n.cpu.GetAllocatableCPUs()
	free := n.cpu.State().GetDefaultCPUSet().Intersection(allocatable)
	machine := n.mem.State().GetMachineState()
	zoneOf := n.machine.zoneOfCPU()
	st := &State{Devices: map[string][]DeviceState{}, Pods: n.pods.uids()}
	for _, z := range n.info.Topology {
		inZone := func(s cpuset.CPUSet) []int {
			out := []int{}
			for _, cpu := range s.List() {
				if zoneOf[cpu] == z.Id {
					out = append(out, cpu)
				}
			}
			return out
		}
		zs := ZoneState{ID: z.Id, AllocatableCPUs: inZone(allocatable), FreeCPUs: inZone(free), Memory: map[string]MemoryState{}}
		if ns, ok := machine[z.Id]; ok && ns != nil {
			zs.Cells = append([]int(nil), ns.Cells...)
			zs.Assignments = ns.NumberOfAssignments
			for name, t := range ns.MemoryMap {
				zs.Memory[string(name)] = MemoryState{Total: t.TotalMemSize, SystemReserved: t.SystemReserved, Allocatable: t.Allocatable, Reserved: t.Reserved, Free: t.Free}
			}
		}
		st.Zones = append(st.Zones, zs)
	}

	used := map[string]map[string]bool{}
	for _, pod := range n.pods.active() {
		for _, c := range allContainers(pod) {
			for resource, devs := range n.dev.GetDevices(string(pod.UID), c.Name) {
				if used[resource] == nil {
					used[resource] = map[string]bool{}
				}
				for id := range devs {
					used[resource][id] = true
				}
			}
		}
	}
	for resource, devs := range allocatableDevicesOf(n.dev) {
		var list []DeviceState
		for id, d := range devs {
			ds := DeviceState{ID: id, NUMANodes: []int{}, Free: !used[resource][id]}
			for _, numa := range d.GetTopology().GetNodes() {
				ds.NUMANodes = append(ds.NUMANodes, int(numa.GetID()))
			}
			list = append(list, ds)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
		st.Devices[resource] = list
	}
	return st
}

// validate checks what the conversion to MachineInfo does not.
func (m *Machine) validate() error {
	zones := map[int]bool{}
	for _, z := range m.Zones {
		zones[z.ID] = true
	}
	for resource, devs := range m.Devices {
		seen := map[string]bool{}
		for _, d := range devs {
			if d.ID == "" || seen[d.ID] {
				return fmt.Errorf("devices of %s: empty or repeated id %q", resource, d.ID)
			}
			seen[d.ID] = true
			if d.NUMA != nil && !zones[*d.NUMA] {
				return fmt.Errorf("device %s of %s: no NUMA zone %d", d.ID, resource, *d.NUMA)
			}
		}
	}
	return nil
}
