package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const driver = "gpu.example.com"

func node() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}
}

// gpus is a node-local slice of worker-1 with devices gpu-0 ... gpu-<n-1>.
func gpus(n int) *resourceapi.ResourceSlice {
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-1-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To("worker-1"),
			Pool:     resourceapi.ResourcePool{Name: "worker-1", Generation: 1, ResourceSliceCount: 1},
		},
	}
	for i := range n {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return slice
}

func class(selector string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{
			{CEL: &resourceapi.CELDeviceSelector{Expression: selector}},
		}},
	}
}

// claim asks for count devices of class gpu (0: left to the API server's default).
func claim(name string, count int64) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: count}},
		}}},
	}
}

// holding is a claim allocated the given devices of worker-1's pool.
func holding(name string, adminAccess bool, devices ...string) *resourceapi.ResourceClaim {
	c := claim(name, int64(len(devices)))
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: driver, Pool: "worker-1", Device: d, AdminAccess: ptr.To(adminAccess),
		})
	}
	return c
}

type response struct {
	ID            json.RawMessage                `json:"id"`
	OK            bool                           `json:"ok"`
	Allocations   []resourceapi.AllocationResult `json:"allocations"`
	Unschedulable bool                           `json:"unschedulable"`
	Error         string                         `json:"error"`
}

// run sends the request lines through serve and returns one response per line that
// is not blank.
func run(t *testing.T, ref *referee, lines ...string) []response {
	t.Helper()
	var out bytes.Buffer
	if err := serve(strings.NewReader(strings.Join(lines, "\n")), &out, ref); err != nil {
		t.Fatal(err)
	}
	var responses []response
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var r response
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("response %q: %v", line, err)
		}
		responses = append(responses, r)
	}
	requests := 0
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			requests++
		}
	}
	if len(responses) != requests {
		t.Fatalf("%d responses to %d requests:\n%s", len(responses), requests, out.String())
	}
	return responses
}

func line(t *testing.T, req request) string {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func devicesOf(a resourceapi.AllocationResult) []string {
	var out []string
	for _, r := range a.Devices.Results {
		out = append(out, r.Pool+"/"+r.Device)
	}
	return out
}

func TestDecisions(t *testing.T) {
	isGPU := "device.driver == '" + driver + "'"
	for _, tc := range []struct {
		name    string
		req     request
		devices []string // allocated: the devices of the one claim
		refused string   // "unschedulable", or a substring of the error
	}{
		{name: "one of two", req: request{Slices: []*resourceapi.ResourceSlice{gpus(2)}, Claims: []*resourceapi.ResourceClaim{claim("a", 1)}},
			devices: []string{"worker-1/gpu-0"}},
		{name: "count defaults to one", req: request{Slices: []*resourceapi.ResourceSlice{gpus(2)}, Claims: []*resourceapi.ResourceClaim{claim("a", 0)}},
			devices: []string{"worker-1/gpu-0"}},
		{name: "three of two", req: request{Slices: []*resourceapi.ResourceSlice{gpus(2)}, Claims: []*resourceapi.ResourceClaim{claim("a", 3)}},
			refused: "unschedulable"},
		{name: "a device in use is not reused", req: request{Slices: []*resourceapi.ResourceSlice{gpus(2)}, Claims: []*resourceapi.ResourceClaim{claim("a", 1)},
			Allocated: []*resourceapi.ResourceClaim{holding("b", false, "gpu-0")}},
			devices: []string{"worker-1/gpu-1"}},
		{name: "every device in use", req: request{Slices: []*resourceapi.ResourceSlice{gpus(2)}, Claims: []*resourceapi.ResourceClaim{claim("a", 1)},
			Allocated: []*resourceapi.ResourceClaim{holding("b", false, "gpu-0", "gpu-1")}},
			refused: "unschedulable"},
		{name: "admin access does not take the device", req: request{Slices: []*resourceapi.ResourceSlice{gpus(1)}, Claims: []*resourceapi.ResourceClaim{claim("a", 1)},
			Allocated: []*resourceapi.ResourceClaim{holding("b", true, "gpu-0")}},
			devices: []string{"worker-1/gpu-0"}},
		{name: "another node's slice", req: request{Slices: []*resourceapi.ResourceSlice{func() *resourceapi.ResourceSlice {
			s := gpus(2)
			s.Spec.NodeName = ptr.To("worker-2")
			return s
		}()}, Claims: []*resourceapi.ResourceClaim{claim("a", 1)}},
			refused: "unschedulable"},
		{name: "missing class", req: request{Slices: []*resourceapi.ResourceSlice{gpus(2)}, Claims: []*resourceapi.ResourceClaim{claim("a", 1)}, Classes: []*resourceapi.DeviceClass{}},
			refused: "unschedulable"},
		{name: "CEL runtime error", req: request{Slices: []*resourceapi.ResourceSlice{gpus(2)}, Claims: []*resourceapi.ResourceClaim{claim("a", 1)},
			Classes: []*resourceapi.DeviceClass{class("1 / 0 == 1")}},
			refused: "CEL runtime error: division by zero"},
		{name: "claim already allocated", req: request{Slices: []*resourceapi.ResourceSlice{gpus(2)}, Claims: []*resourceapi.ResourceClaim{holding("a", false, "gpu-0")}},
			refused: "bad request: claims[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Node = node()
			if tc.req.Classes == nil {
				tc.req.Classes = []*resourceapi.DeviceClass{class(isGPU)}
			}
			r := run(t, newReferee(filterTimeout), line(t, tc.req))[0]
			switch {
			case tc.refused == "":
				if !r.OK || len(r.Allocations) != 1 {
					t.Fatalf("want one allocation, got %+v", r)
				}
				if got := devicesOf(r.Allocations[0]); strings.Join(got, ",") != strings.Join(tc.devices, ",") {
					t.Fatalf("allocated %v, want %v", got, tc.devices)
				}
			case tc.refused == "unschedulable":
				if r.OK || !r.Unschedulable || r.Error != "" {
					t.Fatalf("want unschedulable, got %+v", r)
				}
			default:
				if r.OK || r.Unschedulable || !strings.Contains(r.Error, tc.refused) {
					t.Fatalf("want an error with %q, got %+v", tc.refused, r)
				}
			}
		})
	}
}

// One stream: answers in request order with their ids, a bad line answered too, and
// the stream carries on after it.
func TestServeAnswersEveryLineInOrder(t *testing.T) {
	ok := request{ID: json.RawMessage(`"first"`), Node: node(), Slices: []*resourceapi.ResourceSlice{gpus(2)},
		Classes: []*resourceapi.DeviceClass{class("true")}, Claims: []*resourceapi.ResourceClaim{claim("a", 1)}}
	none := ok
	none.ID = json.RawMessage(`3`)
	none.Claims = []*resourceapi.ResourceClaim{claim("a", 3)}
	rs := run(t, newReferee(filterTimeout),
		line(t, ok),
		`{"id": 2, "node": {"metadata": {"name": "worker-1"}}, "claimz": []}`,
		"",
		line(t, none),
		"not json")
	if string(rs[0].ID) != `"first"` || !rs[0].OK {
		t.Errorf("first: %+v", rs[0])
	}
	if string(rs[1].ID) != `2` || rs[1].OK || !strings.Contains(rs[1].Error, `unknown field "claimz"`) {
		t.Errorf("unknown field: %+v", rs[1])
	}
	if string(rs[2].ID) != `3` || !rs[2].Unschedulable {
		t.Errorf("unschedulable: %+v", rs[2])
	}
	if rs[3].OK || !strings.HasPrefix(rs[3].Error, "bad request") {
		t.Errorf("not json: %+v", rs[3])
	}
}

// An allocation that cannot finish in time is an error naming the time limit (the
// plugin's Filter would call the node unschedulable).
func TestTimeLimit(t *testing.T) {
	req := request{Node: node(), Slices: []*resourceapi.ResourceSlice{gpus(2)},
		Classes: []*resourceapi.DeviceClass{class("true")}, Claims: []*resourceapi.ResourceClaim{claim("a", 1)}}
	r := run(t, newReferee(time.Nanosecond), line(t, req))[0]
	if r.OK || r.Unschedulable || !strings.Contains(r.Error, "timed out after 1ns") {
		t.Fatalf("want a time-out error, got %+v", r)
	}
}
