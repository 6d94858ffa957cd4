package node

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Machine is the hardware of one simulated node, in the shape a node simulator
// naturally holds it. It becomes the cadvisor MachineInfo the kubelet's managers
// take, the same structure cadvisor builds from sysfs on a real node.
type Machine struct {
	// Zones are the NUMA nodes. Ids may be sparse (0, 2); a zone may have no
	// CPUs or no memory.
	Zones []Zone `json:"zones"`
	// Devices per extended resource name (e.g. "example.com/gpu").
	Devices map[string][]Device `json:"devices,omitempty"`
}

// Zone is one NUMA node.
type Zone struct {
	ID int `json:"id"`
	// Memory in bytes, as in the zone's meminfo MemTotal (hugepages included).
	Memory uint64 `json:"memory"`
	// Hugepages: page size (a quantity: "2Mi", "1Gi") → number of pages. A size
	// given for any zone is listed for every zone (with 0 pages where absent), as
	// sysfs lists every page size the machine supports under every node; the
	// memory manager relies on that.
	Hugepages map[string]uint64 `json:"hugepages,omitempty"`
	// Cores: physical cores, each with its hardware threads (SMT siblings).
	Cores []Core `json:"cores,omitempty"`
	// Distances is this zone's row of the NUMA distance matrix exactly as sysfs
	// prints it in node<N>/distance: one entry per online zone, in id order.
	// Needed only for the Topology Manager option prefer-closest-numa-nodes.
	Distances []uint64 `json:"distances,omitempty"`
}

// Core is one physical core.
type Core struct {
	Socket int `json:"socket"`
	// CPUs are the logical CPU ids of the core's threads.
	CPUs []int `json:"cpus"`
}

// Device is one device of an extended resource.
type Device struct {
	ID string `json:"id"`
	// NUMA is the device's NUMA node; nil for a device without topology.
	NUMA *int `json:"numa,omitempty"`
}

// machineInfo builds cadvisor's MachineInfo (what the kubelet's managers read) and
// the node capacity the kubelet derives from it (cpu, memory, hugepages-<size>).
func (m *Machine) machineInfo() (*machineInfo, v1.ResourceList, error) {
	if len(m.Zones) == 0 {
		return nil, nil, fmt.Errorf("machine has no NUMA zones")
	}
	zones := append([]Zone(nil), m.Zones...)
	sort.Slice(zones, func(i, j int) bool { return zones[i].ID < zones[j].ID })

	sizeSet := map[string]bool{}
	for _, z := range zones {
		for size := range z.Hugepages {
			sizeSet[size] = true
		}
	}
	var sizes []string
	for size := range sizeSet {
		sizes = append(sizes, size)
	}
	sort.Strings(sizes)

	info := &machineInfo{}
	seenCPU := map[int]bool{}
	sockets := map[int]bool{}
	hugeTotal := map[uint64]uint64{} // page size KiB → pages
	for i, z := range zones {
		if z.ID < 0 || (i > 0 && zones[i-1].ID == z.ID) {
			return nil, nil, fmt.Errorf("zone ids must be distinct and non-negative, got %d", z.ID)
		}
		node := numaNode{Id: z.ID, Memory: z.Memory, Distances: z.Distances}
		for _, size := range sizes {
			q, err := resource.ParseQuantity(size)
			if err != nil || q.Value() <= 0 || q.Value()%1024 != 0 {
				return nil, nil, fmt.Errorf("zone %d: bad hugepage size %q", z.ID, size)
			}
			kib := uint64(q.Value() / 1024)
			node.HugePages = append(node.HugePages, hugePagesInfo{PageSize: kib, NumPages: z.Hugepages[size]})
			hugeTotal[kib] += z.Hugepages[size]
		}
		for _, c := range z.Cores {
			if len(c.CPUs) == 0 {
				return nil, nil, fmt.Errorf("zone %d: a core without CPUs", z.ID)
			}
			for _, cpu := range c.CPUs {
				if cpu < 0 || seenCPU[cpu] {
					return nil, nil, fmt.Errorf("zone %d: CPU %d is negative or listed twice", z.ID, cpu)
				}
				seenCPU[cpu] = true
			}
			sockets[c.Socket] = true
			// The CPU manager derives core ids from the thread ids; Id is only
			// informative here.
			id := c.CPUs[0]
			for _, cpu := range c.CPUs {
				id = min(id, cpu)
			}
			node.Cores = append(node.Cores, cpuCore{Id: id, Threads: append([]int(nil), c.CPUs...), SocketID: c.Socket})
			info.NumPhysicalCores++
		}
		info.MemoryCapacity += z.Memory
		info.Topology = append(info.Topology, node)
	}
	if len(seenCPU) == 0 {
		return nil, nil, fmt.Errorf("machine has no CPUs")
	}
	info.NumCores = len(seenCPU)
	info.NumSockets = len(sockets)
	var pageSizes []uint64
	for kib := range hugeTotal {
		pageSizes = append(pageSizes, kib)
	}
	sort.Slice(pageSizes, func(i, j int) bool { return pageSizes[i] < pageSizes[j] })
	for _, kib := range pageSizes {
		info.HugePages = append(info.HugePages, hugePagesInfo{PageSize: kib, NumPages: hugeTotal[kib]})
	}

	// The capacity the kubelet computes from cadvisor (pkg/kubelet/cadvisor
	// CapacityFromMachineInfo): logical CPUs, total memory, hugepages per size.
	capacity := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(int64(info.NumCores)*1000, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(int64(info.MemoryCapacity), resource.BinarySI),
	}
	for _, hp := range info.HugePages {
		size := resource.NewQuantity(int64(hp.PageSize)*1024, resource.BinarySI)
		name := v1.ResourceName(v1.ResourceHugePagesPrefix + size.String())
		capacity[name] = *resource.NewQuantity(int64(hp.PageSize*1024*hp.NumPages), resource.BinarySI)
	}
	return info, capacity, nil
}

// zoneOfCPU maps each logical CPU to its NUMA zone.
func (m *Machine) zoneOfCPU() map[int]int {
	out := map[int]int{}
	for _, z := range m.Zones {
		for _, c := range z.Cores {
			for _, cpu := range c.CPUs {
				out[cpu] = z.ID
			}
		}
	}
	return out
}
