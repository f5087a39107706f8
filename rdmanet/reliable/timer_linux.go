package reliable

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// fineTimerThread locks the calling goroutine (the timer loop) to its
// thread and sets the thread's timer slack to 1 µs, so that short sleeps
// end on time (the default slack is 50 µs). The thread ends with the
// goroutine: the runtime does not reuse a thread left locked.
func fineTimerThread() bool {
	runtime.LockOSThread()
	return unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0) == nil
}

// fineSleep sleeps d on the calling thread. The runtime hands the
// processor to other goroutines while the thread sleeps.
func fineSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Nanosleep(&ts, nil)
}
