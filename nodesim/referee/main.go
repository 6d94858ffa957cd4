// Command referee judges pod admissions on simulated NUMA nodes with the kubelet's
// own admission code (Topology Manager, CPU, memory and device managers of
// k8s.io/kubernetes) and serves each node's podresources API. It is driven by
// JSON lines on stdin and answers on stdout; see README.md for the protocol.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"

	"tas.dev/nodesim/referee/internal/protocol"
)

func main() {
	stateDir := flag.String("state-dir", "", "directory under which each node keeps its managers' checkpoints and device plugin sockets (default: a new directory on /dev/shm, else in $TMPDIR); removed at exit")
	featureGates := flag.String("feature-gates", "", "kubelet feature gates to change from their v1.34 defaults, as the kubelet flag: Name=true,Other=false")
	kubeletLogs := flag.Bool("kubelet-logs", false, "pass the kubelet packages' klog output to stderr")
	kubeletVerbosity := flag.Int("v", 0, "klog verbosity of the kubelet packages (with --kubelet-logs)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, *stateDir, *featureGates, *kubeletLogs, *kubeletVerbosity); err != nil {
		log.Error("referee failed", "error", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, stateDir, featureGates string, kubeletLogs bool, verbosity int) error {
	configureKlog(kubeletLogs, verbosity)
	if featureGates != "" {
		if err := utilfeature.DefaultMutableFeatureGate.Set(featureGates); err != nil {
			return fmt.Errorf("--feature-gates: %w", err)
		}
	}
	root, err := makeStateRoot(stateDir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-signals
		log.Info("stopping", "signal", sig.String())
		_ = os.RemoveAll(root)
		os.Exit(0)
	}()

	log.Info("referee ready", "stateDir", root)
	return protocol.NewServer(ctx, root, os.Stdout, log).Serve(os.Stdin)
}

// makeStateRoot creates this process's own directory for node state. The managers
// fsync their checkpoint after every change, which a tmpfs makes free.
func makeStateRoot(parent string) (string, error) {
	if parent == "" {
		parent = os.TempDir()
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && syscall.Access("/dev/shm", 2) == nil {
			parent = "/dev/shm"
		}
	}
	if err := os.MkdirAll(parent, 0o750); err != nil {
		return "", err
	}
	return os.MkdirTemp(parent, "tas-referee-")
}

// configureKlog silences the kubelet packages unless asked: they log several
// lines per admission at level 0 and every rejection as an error.
func configureKlog(enabled bool, verbosity int) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", fmt.Sprint(verbosity))
	if enabled {
		_ = fs.Set("logtostderr", "true")
		return
	}
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}
