//go:build linux

package twohost

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RDMANET_TEST_SYSMON_SLACK=<duration> (a diagnosis, root only): this
// process and the helpers it starts set the timer slack of the Go
// runtime's sysmon thread, which sleeps 20 µs at a time (nanosleep) while
// the process is busy; with a slack of a millisecond those sleeps last up
// to that. It asks how much of the gap to perftest under TCG is sysmon's
// ticking. sysmon is the first thread the runtime starts (runtime.main,
// before any package's init): the second-lowest thread ID. Writing
// another thread's timerslack_ns takes CAP_SYS_NICE.
func init() {
	v := os.Getenv("RDMANET_TEST_SYSMON_SLACK")
	d, err := time.ParseDuration(v)
	if v == "" || err != nil || d <= 0 {
		return
	}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		panic(err)
	}
	var tids []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, n)
		}
	}
	slices.Sort(tids)
	if len(tids) < 2 {
		panic("RDMANET_TEST_SYSMON_SLACK: no sysmon thread")
	}
	f := fmt.Sprintf("/proc/%d/timerslack_ns", tids[1]) // not under task/: a TID names the thread here
	if err := os.WriteFile(f, []byte(strconv.FormatInt(int64(d), 10)), 0); err != nil {
		panic(err)
	}
	sc, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/syscall", tids[1]))
	fmt.Fprintf(os.Stderr, "RXEVM-DIAG sysmon tid %d timer slack %v (syscall %.12s)\n", tids[1], d, sc)
}

// RDMANET_TEST_SYSMON_KEEPER=1 (a diagnosis): a goroutine that sleeps in
// a system call, 5 ms at a time, on a thread of its own. Its P stays in
// the syscall state, so the runtime is never wholly idle and sysmon never
// sleeps deeply; it backs off to a 10 ms tick after 1 ms of nothing to do
// and stays there, where a wake from deep sleep puts it back on 20 µs.
func init() {
	if os.Getenv("RDMANET_TEST_SYSMON_KEEPER") == "" {
		return
	}
	go func() {
		runtime.LockOSThread()
		ts := unix.NsecToTimespec(int64(5 * time.Millisecond))
		for {
			syscall.Syscall6(unix.SYS_PPOLL, 0, 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
			ts = unix.NsecToTimespec(int64(5 * time.Millisecond))
		}
	}()
	fmt.Fprintf(os.Stderr, "RXEVM-DIAG sysmon keeper started\n")
}
