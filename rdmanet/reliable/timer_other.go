//go:build !linux

package reliable

import "time"

func fineTimerThread() bool { return false }

func fineSleep(d time.Duration) { time.Sleep(d) }
