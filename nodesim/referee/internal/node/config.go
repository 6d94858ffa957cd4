package node

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	kubeletvalidation "k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	"k8s.io/utils/cpuset"
)

// kubeletSettings is what the managers of one node are built from: the kubelet's
// own configuration, read the way the kubelet reads its config file, and the
// values the kubelet derives from it at start-up.
type kubeletSettings struct {
	config *kubeletconfig.KubeletConfiguration
	// reservedSystemCPUs: the CPUs the static CPU policy never hands out.
	reservedSystemCPUs cpuset.CPUSet
	// nodeAllocatableReservation: system-reserved + kube-reserved + hard eviction
	// thresholds, per resource of the node's capacity.
	nodeAllocatableReservation v1.ResourceList
}

// parseKubeletConfig decodes a KubeletConfiguration (kubelet.config.k8s.io/v1beta1,
// JSON; apiVersion and kind may be left out) with the kubelet's own scheme, so the
// kubelet's defaults apply to every field left out, then validates it with the
// kubelet's validation and derives the start-up values as cmd/kubelet does.
func parseKubeletConfig(raw json.RawMessage, machine *machineInfo, capacity v1.ResourceList) (*kubeletSettings, error) {
	doc := map[string]any{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("kubelet config: %w", err)
		}
	}
	if _, ok := doc["apiVersion"]; !ok {
		doc["apiVersion"] = "kubelet.config.k8s.io/v1beta1"
	}
	if _, ok := doc["kind"]; !ok {
		doc["kind"] = "KubeletConfiguration"
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	_, codecs, err := kubeletscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	obj, _, err := codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("kubelet config: %w", err)
	}
	kc, ok := obj.(*kubeletconfig.KubeletConfiguration)
	if !ok {
		return nil, fmt.Errorf("kubelet config: decoded %T, want KubeletConfiguration", obj)
	}

	// cmd/kubelet/app's config loading: evictionHard has no scheme default
	// because its signals are OS-specific; a Linux kubelet uses these when the
	// file leaves it out (and merges them in with mergeDefaultEvictionSettings).
	linuxEvictionHard := map[string]string{
		"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
		"imagefs.available": "15%", "imagefs.inodesFree": "5%",
	}
	if kc.EvictionHard == nil {
		kc.EvictionHard = linuxEvictionHard
	} else if kc.MergeDefaultEvictionSettings {
		for k, v := range linuxEvictionHard {
			if _, set := kc.EvictionHard[k]; !set {
				kc.EvictionHard[k] = v
			}
		}
	}

	// Feature gates are process-wide (the kubelet's packages read the global
	// gate); a node cannot differ from the process.
	for name, want := range kc.FeatureGates {
		if got := utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(name)); got != want {
			return nil, fmt.Errorf("kubelet config sets feature gate %s=%t but the referee runs with %t; feature gates are process-wide: start the referee with --feature-gates", name, want, got)
		}
	}
	// The validation's Linux part looks at the host: failCgroupV1 (true by default
	// from v1.35) refuses a cgroup v1 host. The simulated node has no cgroups, and
	// the host running the referee is not the node, so that check is left out.
	checked := *kc
	checked.FailCgroupV1 = false
	if err := kubeletvalidation.ValidateKubeletConfiguration(&checked, utilfeature.DefaultFeatureGate); err != nil {
		return nil, fmt.Errorf("kubelet config is invalid: %w", err)
	}

	s := &kubeletSettings{config: kc}

	// cmd/kubelet/app: reservedSystemCPUs must be a subset of the online CPUs and,
	// when set, replaces the cpu entries of kubeReserved and systemReserved.
	s.reservedSystemCPUs = cpuset.New()
	kubeReserved := copyMap(kc.KubeReserved)
	systemReserved := copyMap(kc.SystemReserved)
	if kc.ReservedSystemCPUs != "" {
		topo, err := discoverTopology(machine)
		if err != nil {
			return nil, fmt.Errorf("unable to discover CPU topology: %w", err)
		}
		reserved, err := cpuset.Parse(kc.ReservedSystemCPUs)
		if err != nil {
			return nil, fmt.Errorf("unable to parse reservedSystemCPUs: %w", err)
		}
		if !reserved.IsSubsetOf(topo.CPUDetails.CPUs()) {
			return nil, fmt.Errorf("reservedSystemCPUs %s is not a subset of the online CPUs %s", reserved, topo.CPUDetails.CPUs())
		}
		s.reservedSystemCPUs = reserved
		if reserved.Size() > 0 {
			delete(kubeReserved, string(v1.ResourceCPU))
			systemReserved[string(v1.ResourceCPU)] = strconv.Itoa(reserved.Size())
		}
	}
	kubeRes, err := parseReservation(kubeReserved)
	if err != nil {
		return nil, fmt.Errorf("kubeReserved: %w", err)
	}
	systemRes, err := parseReservation(systemReserved)
	if err != nil {
		return nil, fmt.Errorf("systemReserved: %w", err)
	}
	thresholds, err := hardEvictionThresholds(kc.EvictionHard)
	if err != nil {
		return nil, fmt.Errorf("evictionHard: %w", err)
	}
	s.nodeAllocatableReservation = nodeAllocatableReservation(capacity, systemRes, kubeRes, thresholds)
	return s, nil
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// parseReservation reads kubeReserved / systemReserved as cmd/kubelet/app does:
// cpu, memory, ephemeral-storage and pid only, each a non-negative quantity.
func parseReservation(m map[string]string) (v1.ResourceList, error) {
	reservable := map[v1.ResourceName]bool{v1.ResourceCPU: true, v1.ResourceMemory: true, v1.ResourceEphemeralStorage: true, "pid": true}
	out := v1.ResourceList{}
	for name, value := range m {
		if !reservable[v1.ResourceName(name)] {
			return nil, fmt.Errorf("cannot reserve %q resource", name)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a quantity: %w", name, value, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s: reservation %s is negative", name, value)
		}
		out[v1.ResourceName(name)] = q
	}
	return out, nil
}

// nodeAllocatableReservation computes what the container manager's
// GetNodeAllocatableReservation returns (pkg/kubelet/cm, not importable here):
// per resource of the capacity, system-reserved + kube-reserved + the amount the
// hard eviction thresholds hold back (memory.available against the memory
// capacity, nodefs.available against ephemeral storage).
func nodeAllocatableReservation(capacity, systemReserved, kubeReserved v1.ResourceList, thresholds []evictionapi.Threshold) v1.ResourceList {
	held := v1.ResourceList{}
	signals := map[evictionapi.Signal]v1.ResourceName{
		evictionapi.SignalMemoryAvailable: v1.ResourceMemory,
		evictionapi.SignalNodeFsAvailable: v1.ResourceEphemeralStorage,
	}
	for _, t := range thresholds {
		name, ok := signals[t.Signal]
		if !ok || t.Operator != evictionapi.OpLessThan {
			continue
		}
		total := capacity[name]
		held[name] = *evictionapi.GetThresholdQuantity(t.Value, &total)
	}
	out := v1.ResourceList{}
	for name := range capacity {
		sum := resource.NewQuantity(0, resource.DecimalSI)
		for _, part := range []v1.ResourceList{systemReserved, kubeReserved, held} {
			if q, ok := part[name]; ok {
				sum.Add(q)
			}
		}
		if !sum.IsZero() {
			out[name] = *sum
		}
	}
	return out
}

// hardEvictionThresholds reads the evictionHard signals that hold back node
// allocatable (memory.available, nodefs.available) with the value rules of the
// kubelet's eviction.ParseThresholdConfig: "N%" of capacity (0% and 100% mean
// no threshold) or a positive quantity. The eviction package itself pulls in the
// whole container manager, so it is not imported; other signals do not affect
// admission and are skipped.
func hardEvictionThresholds(evictionHard map[string]string) ([]evictionapi.Threshold, error) {
	var out []evictionapi.Threshold
	for _, signal := range []evictionapi.Signal{evictionapi.SignalMemoryAvailable, evictionapi.SignalNodeFsAvailable} {
		value, ok := evictionHard[string(signal)]
		if !ok {
			continue
		}
		t := evictionapi.Threshold{Signal: signal, Operator: evictionapi.OpForSignal[signal]}
		if strings.HasSuffix(value, "%") {
			if value == "0%" || value == "100%" {
				continue
			}
			pct, err := strconv.ParseFloat(strings.TrimSuffix(value, "%"), 32)
			if err != nil || pct < 0 || pct > 100 {
				return nil, fmt.Errorf("%s: bad percentage %q", signal, value)
			}
			t.Value.Percentage = float32(pct) / 100
		} else {
			q, err := resource.ParseQuantity(value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", signal, err)
			}
			if q.Sign() <= 0 {
				return nil, fmt.Errorf("%s: threshold %s must be positive", signal, value)
			}
			t.Value.Quantity = &q
		}
		out = append(out, t)
	}
	return out, nil
}
