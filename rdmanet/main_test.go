//go:build linux

package rdmanet_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs the child processes some tests start (the software
// backend in ns2, a link flap, the churn), and in the rxe VM skips the
// examples.
func TestMain(m *testing.M) {
	if os.Getenv("RDMANET_SOFT_CHILD") == "1" {
		os.Exit(softChild())
	}
	if os.Getenv("RDMANET_FLAP_CHILD") == "1" {
		os.Exit(flapChild())
	}
	if os.Getenv("RDMANET_CHURN_CHILD") == "1" {
		churnChildMain() // on the main thread: churn_rxe_test.go
	}
	flag.Parse()
	if testDevice != "" {
		// The examples use the software backend on loopback, which cannot
		// bind UDP 4791 beside rxe: they run in every `go test` outside
		// the VM.
		if s := flag.Lookup("test.skip"); s != nil && s.Value.String() == "" {
			flag.Set("test.skip", "^Example")
		}
	}
	os.Exit(m.Run())
}
