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
