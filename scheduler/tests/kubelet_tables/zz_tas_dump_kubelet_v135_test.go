//go:build k8s_ge_1_35 && !k8s_ge_1_37

// Overlay file like zz_tas_dump_merge_cases_test.go: the package's calls whose
// signatures differ between kubelet minors, as v1.35 and v1.36 have them.

package topologymanager

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

func tasHintsOf(p HintProvider) map[string][]TopologyHint {
	return p.GetTopologyHints(&v1.Pod{}, &v1.Container{})
}

func tasMerge(p Policy, hints []map[string][]TopologyHint) (TopologyHint, bool) {
	return p.Merge(klog.Background(), hints)
}
