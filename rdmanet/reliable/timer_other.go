//go:build !linux

package reliable

import "time"

// fineTimer: elsewhere the timer loop sleeps on runtime timers only.
const fineTimer = false

type wakeTimer struct{}

func (w *wakeTimer) init() error         { return nil }
func (w *wakeTimer) sleep(time.Duration) {}
func (w *wakeTimer) kick()               {}
func (w *wakeTimer) close()              {}
