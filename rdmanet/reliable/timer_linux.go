package reliable

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fineTimer: the timer loop's short sleeps while a NAK is pending are on a
// wakeTimer.
const fineTimer = true

// wakeTimer is where the timer loop sleeps while a NAK is pending: a
// timerfd in the runtime's netpoller (conn.go: fineBelow). A sleep arms
// it for d and parks the goroutine in rc.Read, so
// the processor (P) is free for the readers meanwhile, and it wakes when
// the fd becomes readable, after d plus the wake-up of the thread (about
// 20 µs on a 2-vCPU VM; a timerfd has no timer slack). A runtime timer
// would round a sleep under a millisecond up to one when the process is
// idle (the netpoller's epoll_wait counts in milliseconds), and a
// nanosleep on the goroutine's thread (what this replaced) holds the P
// for the whole sleep, and overslept by the thread's timer slack (50 µs
// by default): with a P for the readers and a P for a sender, a NAK delay
// slept there stalled every reader of the process, the sender's receive
// loop that answers the NAK included (the receivers' NAK-to-repair round
// trip in the latency benchmark: 260 µs with nanosleep, 80 µs with this).
//
// kick wakes a sleep at once (or the next, if none is in progress) by
// arming the timer for 1 ns; kicked keeps a kick that comes between a
// sleep's arming and its wait. Only a kick during a sleep arms the timer
// (a system call): most kicks find the loop parked elsewhere (on its
// channel), and at batch rates the needless timerfd_settime calls were 3%
// of the process's CPU. internal/poll keeps both off a closed fd.
type wakeTimer struct {
	f        *os.File
	rc       syscall.RawConn
	kicked   atomic.Bool
	sleeping atomic.Bool     // in sleep, from before its arming
	its      unix.ItimerSpec // the sleep's, for arm (the timer loop only)
	now      unix.ItimerSpec // 1 ns, for kick
	buf      [8]byte
	arm      func(fd uintptr)
	fire     func(fd uintptr)
	read     func(fd uintptr) bool
}

func (w *wakeTimer) init() error {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return os.NewSyscallError("timerfd_create", err)
	}
	w.f = os.NewFile(uintptr(fd), "reliable-timer")
	if w.rc, err = w.f.SyscallConn(); err != nil {
		w.f.Close()
		return err
	}
	w.now.Value.Nsec = 1
	w.arm = func(fd uintptr) { unix.TimerfdSettime(int(fd), 0, &w.its, nil) }
	w.fire = func(fd uintptr) { unix.TimerfdSettime(int(fd), 0, &w.now, nil) }
	w.read = func(fd uintptr) bool {
		_, err := unix.Read(int(fd), w.buf[:])
		return err != unix.EAGAIN
	}
	return nil
}

// sleep returns after d, at a kick, or at once after close.
//
// A kick stores kicked and then looks at sleeping; sleep stores sleeping
// and then swaps kicked: either the sleep sees the kick and returns, or
// the kick sees the sleep and fires the timer it waits on.
func (w *wakeTimer) sleep(d time.Duration) {
	w.sleeping.Store(true)
	defer w.sleeping.Store(false)
	w.its.Value = unix.NsecToTimespec(int64(d))
	if w.rc.Control(w.arm) != nil {
		return
	}
	if w.kicked.Swap(false) {
		return
	}
	w.rc.Read(w.read)
	// What a kick asked for is looked at next; a later kick sets it again.
	w.kicked.Store(false)
}

func (w *wakeTimer) kick() {
	w.kicked.Store(true)
	if w.sleeping.Load() {
		w.rc.Control(w.fire)
	}
}

func (w *wakeTimer) close() { w.f.Close() }
