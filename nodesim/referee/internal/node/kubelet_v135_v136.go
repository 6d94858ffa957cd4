//go:build k8s_ge_1_35 && !k8s_ge_1_37

// The kubelet's Go API of v1.35 and v1.36 where v1.37 differs again (see
// kubelet_v134.go).

package node

import (
	_ "unsafe" // for go:linkname

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	memorystate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
)

func (n *Node) addContainer(pod *v1.Pod, c *v1.Container, id string) {
	n.cpu.AddContainer(klog.Background(), pod, c, id)
	n.mem.AddContainer(klog.Background(), pod, c, id)
	n.tm.AddContainer(pod, c, id)
}

func (n *Node) memoryBlocks(podUID, containerName string) []memorystate.Block {
	return n.mem.GetMemory(podUID, containerName)
}

func (n *Node) allocatableMemoryBlocks() []memorystate.Block {
	return n.mem.GetAllocatableMemory()
}
