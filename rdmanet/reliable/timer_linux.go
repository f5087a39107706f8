package reliable

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// fineSlack is the timer slack of a fineSleep: the kernel may end a sleep
// this much late to merge wake-ups (prctl PR_SET_TIMERSLACK).
const fineSlack = 1000 // ns

// fineSleep sleeps d with nanosleep(2) on the calling thread: the runtime
// hands the processor to other goroutines while the thread sleeps, and the
// sleep ends after d plus the wake-up, not after the millisecond or so a
// runtime timer takes when the process is idle. The thread's timer slack
// (50 µs by default, which a 10 µs sleep overslept by 70 µs at the median
// on a 2-vCPU VM) is lowered to fineSlack for the sleep and restored after
// it (20 µs over at the median then: the vCPU's wake-up). The goroutine is
// locked to its thread only for those three system calls. (Locking the
// timer goroutine to a thread for good was tried: a conn closed while its
// timer goroutine ran on the main thread left the process unable to
// schedule its other locked goroutines.)
func fineSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	runtime.LockOSThread()
	old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	lower := err == nil && old > fineSlack
	if lower {
		unix.Prctl(unix.PR_SET_TIMERSLACK, fineSlack, 0, 0, 0)
	}
	unix.Nanosleep(&ts, nil)
	if lower {
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
	}
	runtime.UnlockOSThread()
}

const fineSleeps = true
