// Added to k8s.io/kubernetes/pkg/kubelet/cm/topologymanager at build time with
// `go test -overlay` (see dump.sh next to this file); it is not part of any module of
// this repository. It writes the package's own policy merge test tables, the same
// case lists with the same policies and NUMA layouts its Test*Merge functions use, as
// JSON, so the TAS scheduler can replay them through its hint merge.

package topologymanager

import (
	"encoding/json"
	"os"
	"sort"
	"testing"

	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
)

type tasHint struct {
	Mask      []int `json:"mask"`
	Preferred bool  `json:"preferred"`
}

type tasResource struct {
	Name string `json:"name"`
	// nil: the provider has no preference for this resource.
	Hints *[]tasHint `json:"hints"`
}

type tasCase struct {
	Name string `json:"name"`
	// One list per hint provider; an empty list: the provider has no preference at all.
	Providers [][]tasResource `json:"providers"`
	Expected  tasHint         `json:"expected"`
	Admit     bool            `json:"admit"`
}

type tasTable struct {
	Test          string     `json:"test"`
	Policy        string     `json:"policy"`
	PreferClosest bool       `json:"prefer_closest"`
	Nodes         []int      `json:"nodes"`
	Distances     [][]uint64 `json:"distances"`
	Cases         []tasCase  `json:"cases"`
}

func tasMask(m bitmask.BitMask) []int {
	if m == nil {
		return nil
	}
	bits := m.GetBits()
	if bits == nil {
		bits = []int{}
	}
	return bits
}

func tasTableOf(t *testing.T, test string, policy Policy, numaInfo *NUMAInfo, preferClosest bool, tcases []policyMergeTestCase) tasTable {
	table := tasTable{Test: test, Policy: policy.Name(), PreferClosest: preferClosest, Nodes: numaInfo.Nodes}
	for _, node := range numaInfo.Nodes {
		table.Distances = append(table.Distances, numaInfo.NUMADistances[node])
	}
	for _, tc := range tcases {
		var providersHints []map[string][]TopologyHint
		c := tasCase{Name: tc.name, Providers: [][]tasResource{}}
		for _, provider := range tc.hp {
			hints := tasHintsOf(provider)
			providersHints = append(providersHints, hints)
			resources := []tasResource{}
			for name, list := range hints {
				r := tasResource{Name: name}
				if list != nil {
					converted := []tasHint{}
					for _, h := range list {
						converted = append(converted, tasHint{Mask: tasMask(h.NUMANodeAffinity), Preferred: h.Preferred})
					}
					r.Hints = &converted
				}
				resources = append(resources, r)
			}
			sort.Slice(resources, func(i, j int) bool { return resources[i].Name < resources[j].Name })
			c.Providers = append(c.Providers, resources)
		}
		actual, admit := tasMerge(policy, providersHints)
		if !actual.IsEqual(tc.expected) {
			t.Errorf("%s/%s: the package's own expectation %v does not hold: %v", test, tc.name, tc.expected, actual)
		}
		c.Expected = tasHint{Mask: tasMask(tc.expected.NUMANodeAffinity), Preferred: tc.expected.Preferred}
		c.Admit = admit
		table.Cases = append(table.Cases, c)
	}
	return table
}

func TestTASDumpMergeCases(t *testing.T) {
	out := os.Getenv("TAS_KUBELET_TABLES_OUT")
	if out == "" {
		t.Skip("TAS_KUBELET_TABLES_OUT is not set")
	}
	var tables []tasTable

	// As TestPolicyBestEffortMerge.
	four := commonNUMAInfoFourNodes()
	bestEffort := &bestEffortPolicy{numaInfo: four}
	tcases := commonPolicyMergeTestCases(four.Nodes)
	tcases = append(tcases, bestEffort.mergeTestCases(four.Nodes)...)
	tcases = append(tcases, bestEffort.mergeTestCasesNoPolicies(four.Nodes)...)
	tables = append(tables, tasTableOf(t, "TestPolicyBestEffortMerge", bestEffort, four, false, tcases))

	// As TestPolicyBestEffortMergeClosestNUMA.
	eight := commonNUMAInfoEightNodes()
	closest := PolicyOptions{PreferClosestNUMA: true}
	bestEffortClosest := &bestEffortPolicy{numaInfo: eight, opts: closest}
	tcases = commonPolicyMergeTestCases(eight.Nodes)
	tcases = append(tcases, bestEffortClosest.mergeTestCases(eight.Nodes)...)
	tcases = append(tcases, bestEffortClosest.mergeTestCasesClosestNUMA(eight.Nodes)...)
	tables = append(tables, tasTableOf(t, "TestPolicyBestEffortMergeClosestNUMA", bestEffortClosest, eight, true, tcases))

	// As TestPolicyRestrictedMerge.
	four = commonNUMAInfoFourNodes()
	restricted := &restrictedPolicy{bestEffortPolicy{numaInfo: four}}
	tcases = commonPolicyMergeTestCases(four.Nodes)
	tcases = append(tcases, restricted.mergeTestCases(four.Nodes)...)
	tcases = append(tcases, restricted.mergeTestCasesNoPolicies(four.Nodes)...)
	tables = append(tables, tasTableOf(t, "TestPolicyRestrictedMerge", restricted, four, false, tcases))

	// As TestPolicyRestrictedMergeClosestNUMA.
	eight = commonNUMAInfoEightNodes()
	restrictedClosest := &restrictedPolicy{bestEffortPolicy{numaInfo: eight, opts: closest}}
	tcases = commonPolicyMergeTestCases(eight.Nodes)
	tcases = append(tcases, restrictedClosest.mergeTestCases(eight.Nodes)...)
	tcases = append(tcases, restrictedClosest.mergeTestCasesClosestNUMA(eight.Nodes)...)
	tables = append(tables, tasTableOf(t, "TestPolicyRestrictedMergeClosestNUMA", restrictedClosest, eight, true, tcases))

	// As TestPolicySingleNumaNodeMerge.
	four = commonNUMAInfoFourNodes()
	single := &singleNumaNodePolicy{numaInfo: four, opts: PolicyOptions{}}
	tcases = commonPolicyMergeTestCases(four.Nodes)
	tcases = append(tcases, single.mergeTestCases(four.Nodes)...)
	tables = append(tables, tasTableOf(t, "TestPolicySingleNumaNodeMerge", single, four, false, tcases))

	// TestPolicyNoneMerge lists its cases inside the test function; the none policy's
	// own Merge judges the common table instead (expected = what it returns).
	none := NewNonePolicy()
	tcases = commonPolicyMergeTestCases(four.Nodes)
	for i := range tcases {
		var providersHints []map[string][]TopologyHint
		for _, provider := range tcases[i].hp {
			providersHints = append(providersHints, tasHintsOf(provider))
		}
		tcases[i].expected, _ = tasMerge(none, providersHints)
	}
	tables = append(tables, tasTableOf(t, "TestPolicyNoneMerge", none, four, false, tcases))

	data, err := json.MarshalIndent(map[string]any{"tables": tables}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
