package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// referee is the built binary: $REFEREE_BIN (build.sh's output) or a fresh
// `go build` of this module, removed when the tests end.
var referee = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("REFEREE_BIN"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "referee-bin-")
	if err != nil {
		return "", err
	}
	builtIn = dir
	bin := filepath.Join(dir, "referee")
	// Same environment as the `go test` running this, so the build reuses the
	// packages it compiled (a different CGO_ENABLED would rebuild them all).
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

var builtIn string

func TestMain(m *testing.M) {
	code := m.Run()
	if builtIn != "" {
		os.RemoveAll(builtIn)
	}
	os.Exit(code)
}

// process is a running referee and its JSON-lines channel.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Scanner
	nextID int
}

func start(t testing.TB) *process {
	t.Helper()
	bin, err := referee()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, stdin: stdin, stdout: bufio.NewScanner(stdout)}
	p.stdout.Buffer(make([]byte, 0, 1<<20), 64<<20)
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("referee did not exit after stdin closed")
		}
	})
	return p
}

type response struct {
	ID     int             `json:"id"`
	OK     bool            `json:"ok"`
	Error  string          `json:"error"`
	Result json.RawMessage `json:"result"`
}

// send writes requests (ids assigned in order) and returns their responses by id.
func (p *process) send(t testing.TB, reqs ...map[string]any) map[int]response {
	t.Helper()
	var ids []int
	w := bufio.NewWriter(p.stdin)
	for _, r := range reqs {
		p.nextID++
		r["id"] = p.nextID
		ids = append(ids, p.nextID)
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(append(line, '\n'))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	out := map[int]response{}
	for len(out) < len(ids) && p.stdout.Scan() {
		var r response
		if err := json.Unmarshal(p.stdout.Bytes(), &r); err != nil {
			t.Fatalf("bad response line %q: %v", p.stdout.Text(), err)
		}
		out[r.ID] = r
	}
	if len(out) < len(ids) {
		t.Fatalf("referee stopped answering: %v", p.stdout.Err())
	}
	return out
}

func machine(zones, cpusPerZone int, gpus bool) map[string]any {
	var zs []map[string]any
	cpu := 0
	for z := 0; z < zones; z++ {
		var cores []map[string]any
		for c := 0; c < cpusPerZone/2; c++ {
			cores = append(cores, map[string]any{"socket": 0, "cpus": []int{cpu, cpu + 1}})
			cpu += 2
		}
		zs = append(zs, map[string]any{"id": z, "memory": 32 << 30, "hugepages": map[string]int{"1Gi": 4}, "cores": cores})
	}
	m := map[string]any{"zones": zs}
	if gpus {
		var devs []map[string]any
		for z := 0; z < zones; z++ {
			devs = append(devs, map[string]any{"id": fmt.Sprintf("gpu-%d", z), "numa": z})
		}
		m["devices"] = map[string]any{"example.com/gpu": devs}
	}
	return m
}

var staticKubelet = map[string]any{
	"topologyManagerPolicy": "single-numa-node",
	"topologyManagerScope":  "pod",
	"cpuManagerPolicy":      "static",
	"reservedSystemCPUs":    "0,1",
	"memoryManagerPolicy":   "Static",
	"kubeReserved":          map[string]string{"memory": "924Mi"},
	"reservedMemory":        []map[string]any{{"numaNode": 0, "limits": map[string]string{"memory": "1Gi"}}},
}

func guaranteedPod(name string, cpu int, extra map[string]string) map[string]any {
	limits := map[string]string{"cpu": fmt.Sprint(cpu), "memory": "1Gi"}
	for k, v := range extra {
		limits[k] = v
	}
	return map[string]any{
		"metadata": map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name},
		"spec":     map[string]any{"containers": []map[string]any{{"name": "app", "resources": map[string]any{"limits": limits}}}},
	}
}

func TestJSONLinesRoundTrip(t *testing.T) {
	p := start(t)
	podres := t.TempDir()

	got := p.send(t,
		map[string]any{"op": "addNode", "node": "worker-1", "machine": machine(2, 8, true), "kubelet": staticKubelet, "podResourcesDir": podres},
		map[string]any{"op": "admit", "node": "worker-1", "pod": guaranteedPod("a", 4, map[string]string{"example.com/gpu": "1"})},
		map[string]any{"op": "admit", "node": "worker-1", "pod": guaranteedPod("b", 9, nil)},
		map[string]any{"op": "state", "node": "worker-1"},
		map[string]any{"op": "remove", "node": "worker-1", "podUID": "uid-a"},
		map[string]any{"op": "state", "node": "worker-1"},
		map[string]any{"op": "admit", "node": "nowhere", "pod": guaranteedPod("c", 1, nil)},
		map[string]any{"op": "removeNode", "node": "worker-1"},
		map[string]any{"op": "state", "node": "worker-1"},
	)
	for id := 1; id <= 6; id++ {
		if !got[id].OK {
			t.Fatalf("request %d failed: %s", id, got[id].Error)
		}
	}

	var added struct {
		PodResourcesSocket string            `json:"podResourcesSocket"`
		Allocatable        map[string]string `json:"allocatable"`
	}
	mustDecode(t, got[1].Result, &added)
	if added.PodResourcesSocket != filepath.Join(podres, "kubelet.sock") || added.Allocatable["cpu"] != "14" || added.Allocatable["example.com/gpu"] != "2" {
		t.Errorf("addNode answered %s", got[1].Result)
	}

	var a struct {
		Admit      bool `json:"admit"`
		Containers []struct {
			CPUs    []int `json:"cpus"`
			Devices []struct {
				IDs []string `json:"ids"`
			} `json:"devices"`
		} `json:"containers"`
	}
	mustDecode(t, got[2].Result, &a)
	if !a.Admit || len(a.Containers) != 1 || len(a.Containers[0].CPUs) != 4 || len(a.Containers[0].Devices) != 1 {
		t.Errorf("admit a answered %s", got[2].Result)
	}

	var b struct {
		Admit   bool   `json:"admit"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	mustDecode(t, got[3].Result, &b)
	if b.Admit || b.Reason != "TopologyAffinityError" || b.Message == "" {
		t.Errorf("admit b answered %s", got[3].Result)
	}

	if free(t, got[4].Result) != 14-4 || free(t, got[6].Result) != 14 {
		t.Errorf("free CPUs %d with pod a, %d after removing it; want 10 and 14", free(t, got[4].Result), free(t, got[6].Result))
	}
	if got[7].OK || !strings.Contains(got[7].Error, "unknown node") {
		t.Errorf("admit on an unknown node answered %+v", got[7])
	}
	if !got[8].OK || got[9].OK {
		t.Errorf("removeNode answered %+v, state afterwards %+v", got[8], got[9])
	}
}

func mustDecode(t testing.TB, data json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
}

func free(t testing.TB, state json.RawMessage) int {
	var st struct {
		Zones []struct {
			FreeCPUs []int `json:"freeCPUs"`
		} `json:"zones"`
	}
	mustDecode(t, state, &st)
	n := 0
	for _, z := range st.Zones {
		n += len(z.FreeCPUs)
	}
	return n
}

// TestScale prints what the benchmark's scale costs: one node's addNode plus
// 1,000 admissions (and removals, so the node never fills up), and the resident
// memory of one referee serving 500 nodes. Informative only.
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("scale measurement")
	}
	p := start(t)
	began := time.Now()
	p.send(t, map[string]any{"op": "addNode", "node": "bench", "machine": machine(4, 16, true), "kubelet": staticKubelet})
	added := time.Since(began)
	var reqs []map[string]any
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("p%d", i)
		reqs = append(reqs,
			map[string]any{"op": "admit", "node": "bench", "pod": guaranteedPod(name, 1+i%4, nil)},
			map[string]any{"op": "remove", "node": "bench", "podUID": "uid-" + name})
	}
	admitted := 0
	for id, r := range p.send(t, reqs...) {
		if !r.OK {
			t.Fatalf("request %d: %s", id, r.Error)
		}
		if strings.Contains(string(r.Result), `"admit":true`) {
			admitted++
		}
	}
	t.Logf("addNode %v; addNode + 1,000 admits (+ removes) %v; %d admitted", added, time.Since(began), admitted)

	began = time.Now()
	var nodes []map[string]any
	for i := 0; i < 500; i++ {
		nodes = append(nodes, map[string]any{"op": "addNode", "node": fmt.Sprintf("n%d", i), "machine": machine(2, 32, true),
			"kubelet": staticKubelet, "podResourcesDir": filepath.Join(t.TempDir(), "pr")})
	}
	for id, r := range p.send(t, nodes...) {
		if !r.OK {
			t.Fatalf("addNode %d: %s", id, r.Error)
		}
	}
	var pods []map[string]any
	for i := 0; i < 500; i++ {
		pods = append(pods, map[string]any{"op": "admit", "node": fmt.Sprintf("n%d", i), "pod": guaranteedPod("w", 8, map[string]string{"example.com/gpu": "1"})})
	}
	p.send(t, pods...)
	t.Logf("500 nodes added and one pod admitted on each in %v; referee RSS %s", time.Since(began), rss(t, p.cmd.Process.Pid))
}

func rss(t testing.TB, pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:"))
		}
	}
	return "unknown"
}
