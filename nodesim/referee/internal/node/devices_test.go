package node

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The in-process plugins stand in for device plugins only; the device manager
// must decide exactly as it does with the kubelet's own stub plugins registered
// over the real registration socket and ListAndWatch stream.
func TestInProcessPluginsDecideAsTheKubeletStubPlugins(t *testing.T) {
	m := machineSpec{zones: 2, coresPerZone: 2, threads: 2, memory: 8 * gib, gpus: []int{0, 0, 1, 1, 1}}.build()
	m.Devices["example.com/nic"] = []Device{{ID: "nic-a", NUMA: intPtr(1)}, {ID: "nic-b"}}
	kubelet := kubeletJSON(t, map[string]any{
		"topologyManagerPolicy": "restricted",
		"topologyManagerScope":  "pod",
		"cpuManagerPolicy":      "static",
		"reservedSystemCPUs":    "0",
	})
	stub := newNode(t, Options{Machine: m, Kubelet: kubelet, DevicePlugins: StubPlugins})
	inProcess := newNode(t, Options{Machine: m, Kubelet: kubelet, DevicePlugins: InProcessPlugins})

	var pods []string
	for i, gpus := range []string{"2", "1", "3", "1", "1", "2"} {
		spec := podSpec{name: fmt.Sprintf("p%d", i), gpus: gpus, nic: i%2 == 0}
		a, errA := stub.Admit(spec.build())
		b, errB := inProcess.Admit(spec.build())
		if errA != nil || errB != nil {
			t.Fatalf("admit: %v / %v", errA, errB)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("pod %d: stub plugins %+v, in-process %+v", i, a, b)
		}
		t.Logf("pod %d (%s GPUs, nic %t): admit=%t %s", i, gpus, spec.nic, a.Admit, a.Reason)
		if a.Admit {
			pods = append(pods, fmt.Sprintf("uid-p%d", i))
		}
	}
	if len(pods) < 2 || len(pods) == 6 {
		t.Fatalf("%d of 6 pods admitted; the sequence should admit several and reject some", len(pods))
	}
	if !reflect.DeepEqual(stub.State(), inProcess.State()) {
		t.Fatalf("states differ:\nstub       %+v\nin-process %+v", stub.State(), inProcess.State())
	}
}

type podSpec struct {
	name string
	gpus string
	nic  bool
}

func (s podSpec) build() *v1.Pod {
	res := map[string]string{"cpu": "1", "memory": "256Mi", "example.com/gpu": s.gpus}
	if s.nic {
		res["example.com/nic"] = "1"
	}
	return pod(s.name, nil, container("app", res))
}

func intPtr(i int) *int { return &i }
