package reliable

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPU and threadCPU are the user and system CPU time of the
// process and of the calling thread.
func processCPU() time.Duration { return cpuTime(unix.RUSAGE_SELF) }
func threadCPU() time.Duration  { return cpuTime(unix.RUSAGE_THREAD) }

// contextSwitches counts the process's threads' context switches,
// voluntary (a sleep: each wake-up) and not.
func contextSwitches() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}

func cpuTime(who int) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// paceUntil returns at next, yielding the CPU to the kernel's other
// runnable threads meanwhile (a raw system call: the P stays with the
// caller, which is locked to its thread during the measurement).
func paceUntil(next time.Time) {
	for time.Now().Before(next) {
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}
