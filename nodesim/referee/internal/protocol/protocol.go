// Package protocol is the referee's control channel: JSON requests, one per line,
// on stdin; JSON responses, one per line, on stdout, each carrying its request's
// id. Requests for one node are handled in the order they arrive; requests for
// different nodes run in parallel, so responses may come out of order.
package protocol

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"tas.dev/nodesim/referee/internal/node"
)

// Request is one line on stdin. Op selects which other fields matter.
type Request struct {
	// ID is echoed in the response; any JSON value.
	ID   json.RawMessage `json:"id"`
	Op   string          `json:"op"`
	Node string          `json:"node,omitempty"`

	// addNode
	Machine         *node.Machine      `json:"machine,omitempty"`
	Kubelet         json.RawMessage    `json:"kubelet,omitempty"`
	PodResourcesDir string             `json:"podResourcesDir,omitempty"`
	DevicePlugins   node.DevicePlugins `json:"devicePlugins,omitempty"`
	Labels          map[string]string  `json:"labels,omitempty"`
	Taints          []v1.Taint         `json:"taints,omitempty"`

	// admit
	Pod *v1.Pod `json:"pod,omitempty"`

	// remove
	PodUID string `json:"podUID,omitempty"`
}

// Response is one line on stdout.
type Response struct {
	ID     json.RawMessage `json:"id"`
	OK     bool            `json:"ok"`
	Error  string          `json:"error,omitempty"`
	Result any             `json:"result,omitempty"`
}

// AddNodeResult answers addNode.
type AddNodeResult struct {
	Node string `json:"node"`
	// PodResourcesSocket is the path of the node's podresources socket, if served.
	PodResourcesSocket string `json:"podResourcesSocket,omitempty"`
	node.Resources
}

// RemoveResult answers remove.
type RemoveResult struct {
	// Removed is false when the node had no such pod.
	Removed bool `json:"removed"`
}

// Server dispatches requests to nodes.
type Server struct {
	ctx       context.Context
	stateRoot string
	log       *slog.Logger

	mu      sync.Mutex
	workers map[string]*worker
	seq     int

	out     *bufio.Writer
	outMu   sync.Mutex
	pending sync.WaitGroup
}

// NewServer serves nodes whose state directories go under stateRoot.
func NewServer(ctx context.Context, stateRoot string, out io.Writer, log *slog.Logger) *Server {
	return &Server{ctx: ctx, stateRoot: stateRoot, log: log, workers: map[string]*worker{}, out: bufio.NewWriter(out)}
}

// Serve reads requests until in ends, waits for every request to be answered,
// then closes all nodes.
func (s *Server) Serve(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var req Request
		if err := json.Unmarshal(line, &req); err != nil {
			s.reply(Response{ID: idOf(line), Error: fmt.Sprintf("bad request: %v", err)})
			continue
		}
		s.dispatch(&req)
	}
	s.pending.Wait()
	s.CloseAll()
	return sc.Err()
}

// idOf recovers the id of a request that did not decode as a whole.
func idOf(line []byte) json.RawMessage {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(line, &probe)
	return probe.ID
}

func (s *Server) reply(r Response) {
	if r.ID == nil {
		r.ID = json.RawMessage("null")
	}
	r.OK = r.Error == ""
	data, err := json.Marshal(r)
	if err != nil {
		data, _ = json.Marshal(Response{ID: r.ID, Error: fmt.Sprintf("cannot encode the result: %v", err)})
	}
	s.outMu.Lock()
	defer s.outMu.Unlock()
	_, _ = s.out.Write(append(data, '\n'))
	_ = s.out.Flush()
}

func (s *Server) dispatch(req *Request) {
	switch req.Op {
	case "ping":
		s.reply(Response{ID: req.ID, Result: map[string]int{"nodes": s.nodeCount()}})
		return
	case "addNode", "admit", "remove", "state", "removeNode":
	default:
		s.reply(Response{ID: req.ID, Error: fmt.Sprintf("unknown op %q", req.Op)})
		return
	}
	if req.Node == "" {
		s.reply(Response{ID: req.ID, Error: "no node given"})
		return
	}

	s.mu.Lock()
	w := s.workers[req.Node]
	if req.Op == "addNode" {
		if w != nil {
			s.mu.Unlock()
			s.reply(Response{ID: req.ID, Error: fmt.Sprintf("node %s exists", req.Node)})
			return
		}
		s.seq++
		w = newWorker(filepath.Join(s.stateRoot, fmt.Sprintf("n%d", s.seq)))
		s.workers[req.Node] = w
	}
	if w == nil {
		s.mu.Unlock()
		s.reply(Response{ID: req.ID, Error: fmt.Sprintf("unknown node %s", req.Node)})
		return
	}
	s.pending.Add(1)
	w.push(func() {
		defer s.pending.Done()
		result, err := s.handle(w, req)
		resp := Response{ID: req.ID, Result: result}
		if err != nil {
			resp.Error = err.Error()
		}
		s.reply(resp)
	})
	s.mu.Unlock()
}

// handle runs on the node's worker, one request at a time.
func (s *Server) handle(w *worker, req *Request) (any, error) {
	if req.Op == "addNode" {
		return s.addNode(w, req)
	}
	if w.node == nil {
		return nil, fmt.Errorf("unknown node %s", req.Node)
	}
	switch req.Op {
	case "admit":
		if req.Pod == nil {
			return nil, fmt.Errorf("admit: no pod")
		}
		return w.node.Admit(req.Pod)
	case "remove":
		if req.PodUID == "" {
			return nil, fmt.Errorf("remove: no podUID")
		}
		removed, err := w.node.Remove(types.UID(req.PodUID))
		return RemoveResult{Removed: removed}, err
	case "state":
		return w.node.State(), nil
	case "removeNode":
		s.forget(req.Node, w)
		w.close()
		return map[string]string{"node": req.Node}, nil
	}
	return nil, fmt.Errorf("unknown op %q", req.Op)
}

func (s *Server) addNode(w *worker, req *Request) (any, error) {
	if req.Machine == nil {
		s.forget(req.Node, w)
		return nil, fmt.Errorf("addNode: no machine")
	}
	n, err := node.New(s.ctx, node.Options{
		Name:            req.Node,
		Machine:         *req.Machine,
		Kubelet:         req.Kubelet,
		PodResourcesDir: req.PodResourcesDir,
		StateDir:        w.stateDir,
		DevicePlugins:   req.DevicePlugins,
		Labels:          req.Labels,
		Taints:          req.Taints,
	})
	if err != nil {
		s.forget(req.Node, w)
		w.close()
		return nil, fmt.Errorf("addNode %s: %w", req.Node, err)
	}
	w.node = n
	s.log.Debug("node added", "node", req.Node, "stateDir", w.stateDir)
	res := AddNodeResult{Node: req.Node, Resources: n.Resources()}
	if req.PodResourcesDir != "" {
		res.PodResourcesSocket = filepath.Join(req.PodResourcesDir, "kubelet.sock")
	}
	return res, nil
}

// forget unregisters a node name, if it still names this worker; requests already
// queued behind are answered "unknown node".
func (s *Server) forget(name string, w *worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.workers[name] == w {
		delete(s.workers, name)
	}
	w.finish()
}

func (s *Server) nodeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.workers)
}

// CloseAll stops every node and removes its state.
func (s *Server) CloseAll() {
	s.mu.Lock()
	workers := s.workers
	s.workers = map[string]*worker{}
	s.mu.Unlock()
	for _, w := range workers {
		w.finish()
		w.close()
	}
}

// worker runs one node's requests in arrival order on its own goroutine.
type worker struct {
	stateDir string
	node     *node.Node

	mu       sync.Mutex
	jobs     []func()
	wake     chan struct{}
	finished bool
	closed   sync.Once
}

func newWorker(stateDir string) *worker {
	w := &worker{stateDir: stateDir, wake: make(chan struct{}, 1)}
	go w.run()
	return w
}

func (w *worker) push(job func()) {
	w.mu.Lock()
	w.jobs = append(w.jobs, job)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// finish lets the goroutine end once its queue is empty.
func (w *worker) finish() {
	w.mu.Lock()
	w.finished = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) run() {
	for {
		w.mu.Lock()
		if len(w.jobs) == 0 {
			done := w.finished
			w.mu.Unlock()
			if done {
				return
			}
			<-w.wake
			continue
		}
		job := w.jobs[0]
		w.jobs = w.jobs[1:]
		w.mu.Unlock()
		job()
	}
}

// close stops the node and deletes its state directory; later requests already
// queued for it see no node.
func (w *worker) close() {
	w.closed.Do(func() {
		if w.node != nil {
			w.node.Close()
			w.node = nil
		}
		_ = os.RemoveAll(w.stateDir)
	})
}
