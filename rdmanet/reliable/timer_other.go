//go:build !linux

package reliable

import "time"

func fineSleep(d time.Duration) { time.Sleep(d) }

const fineSleeps = false
