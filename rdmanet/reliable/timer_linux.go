package reliable

import (
	"time"

	"golang.org/x/sys/unix"
)

// fineSleep sleeps d with nanosleep(2) on the calling thread: the runtime
// hands the processor to other goroutines while the thread sleeps, and the
// sleep ends after d plus the thread's timer slack (50 µs by default), not
// after the millisecond or so a runtime timer takes when the process is
// idle. (Locking the timer goroutine to a thread with a 1 µs slack was
// tried: a conn closed while its timer goroutine ran on the main thread
// left the process unable to schedule its other locked goroutines.)
func fineSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Nanosleep(&ts, nil)
}

const fineSleeps = true
