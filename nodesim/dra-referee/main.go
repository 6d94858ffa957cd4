// Command dra-referee answers "can these ResourceClaims be allocated on this node, and
// how?" with kube-scheduler's own structured-parameters allocator
// (k8s.io/dynamic-resource-allocation/structured), set up as the DynamicResources
// plugin of kube-scheduler v1.34 sets it up with its default feature gates. One
// process serves any number of cases: a JSON request per line on stdin, a JSON
// response per line on stdout, in the same order; logs on stderr. See README.md.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/klog/v2"
)

// filterTimeout is kube-scheduler's default DynamicResourcesArgs.FilterTimeout
// (DynamicResourcesFilterTimeoutDefault in k8s.io/kube-scheduler/config/v1), which
// applies because the DRASchedulerFilterTimeout gate is on by default in 1.34.
const filterTimeout = 10 * time.Second

func main() {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	timeout := flag.Duration("timeout", filterTimeout, "time limit of one allocation (kube-scheduler's default DRA filter timeout)")
	verbosity := flag.Int("v", 0, "klog verbosity of the allocator (5: one line per allocation, 7: every device tried)")
	flag.Parse()
	_ = klogFlags.Set("v", fmt.Sprint(*verbosity))
	_ = klogFlags.Set("logtostderr", "true")

	if err := serve(os.Stdin, os.Stdout, newReferee(*timeout)); err != nil {
		fmt.Fprintf(os.Stderr, "dra-referee: %v\n", err)
		os.Exit(1)
	}
}

// serve answers every request line of in with one response line on out, in order,
// until in ends.
func serve(in io.Reader, out io.Writer, ref *referee) error {
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriter(out)
	for {
		line, readErr := r.ReadBytes('\n')
		if len(line) > 0 && !isBlank(line) {
			if _, err := w.Write(append(ref.answer(line), '\n')); err != nil {
				return err
			}
			// The client waits for this answer before sending the next request.
			if err := w.Flush(); err != nil {
				return err
			}
		}
		if errors.Is(readErr, io.EOF) {
			return nil
		}
		if readErr != nil {
			return readErr
		}
	}
}

func isBlank(line []byte) bool {
	for _, b := range line {
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return false
		}
	}
	return true
}
