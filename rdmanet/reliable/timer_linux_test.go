package reliable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The timer loop's fine sleep (wakeTimer: a timerfd in the netpoller)
// lasts what it was asked: a timerfd does not fire early, so a sleep of
// d returns no sooner than d on the monotonic clock. A kick ends a
// sleep at once (here one of an hour), and so does close.
func TestWakeTimerSleeps(t *testing.T) {
	var w wakeTimer
	require.NoError(t, w.init())
	const d = 20 * time.Millisecond
	start := time.Now()
	w.sleep(d)
	require.GreaterOrEqual(t, time.Since(start), d, "a sleep of %v", d)

	ended := func() chan struct{} {
		done := make(chan struct{})
		go func() {
			w.sleep(time.Hour)
			close(done)
		}()
		return done
	}
	wait := func(done chan struct{}, what string) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("a sleep of an hour not ended by %s in 10 s", what)
		}
	}
	done := ended()
	waitCond(t, "the sleep starts", w.sleeping.Load)
	w.kick()
	wait(done, "a kick")

	w.close()
	wait(ended(), "close")
}

// The package doc promises that, while a NAK is pending, delays under
// 500 µs are slept on the timerfd (fineBelow) and longer ones on a
// runtime timer. (Seed 138: fineBelow 500 -> 501 µs survived.)
func TestFineBelowIs500Microseconds(t *testing.T) {
	require.True(t, fineTimer, "the fine timer on Linux")
	require.Equal(t, int64(500*time.Microsecond), fineBelow, "the delay from which the timer loop sleeps on a runtime timer")
}
