//go:build !linux

package reliable

import "time"

// Per-thread CPU time is Linux's: elsewhere the benchmark reports 0.
func processCPU() time.Duration { return 0 }
func threadCPU() time.Duration  { return 0 }
func contextSwitches() int64    { return 0 }

// paceUntil returns at next, spinning.
func paceUntil(next time.Time) {
	for time.Now().Before(next) {
	}
}
