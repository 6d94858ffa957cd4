package node

import (
	"flag"
	"io"
	"os"
	"testing"

	"k8s.io/klog/v2"
)

// TestMain keeps the kubelet packages' logs out of the test output unless the
// test runs with -kubelet-logs.
func TestMain(m *testing.M) {
	logs := flag.Bool("kubelet-logs", false, "show the kubelet packages' klog output")
	flag.Parse()
	if !*logs {
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("alsologtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}
