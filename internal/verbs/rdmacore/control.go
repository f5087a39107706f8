//go:build linux && cgo

package rdmacore

import (
	"runtime"
	"sync"
)

// The control thread: one locked OS thread on which every call that may
// make libibverbs list devices runs (ibv_get_device_list, and librdmacm's
// first rdma_cm call, rdma_bind_addr and rdma_get_devices, which list them
// through sync_devices_list).
//
// libibverbs allocates a device's struct on the thread that first lists
// it, from that thread's malloc arena. librdmacm 30 to 51 (Debian 12 has
// 44.0; fixed in v52, "librdmacm: Fix an overflow bug in qsort comparison
// function") sorts those pointers with a comparator that truncates their
// difference to an int: two structs from different arenas, far apart,
// can sort out of order, and its next merge of the device list (a device
// added or removed) then drops a device that is still there. Once its list
// is empty, every rdma_cm call deadlocks on librdmacm's own mutex
// (ucma_init reenters itself through ucma_set_af_ib_support). Devices
// listed on one thread share one arena and sort right: TestRXEDeviceChurn.
//
// Only the control path runs here; the data path (posts, polls, arms,
// CQ events) stays on the caller's thread.
var control struct {
	once sync.Once
	req  chan func()
}

// onControlThread runs f on the control thread and returns when it is
// done. f must not block for long: it holds up every other control call.
func onControlThread(f func()) {
	control.once.Do(func() {
		control.req = make(chan func())
		go func() {
			// Locked for the life of the process: the thread, and so
			// its malloc arena, never changes.
			runtime.LockOSThread()
			for f := range control.req {
				f()
			}
		}()
	})
	done := make(chan struct{})
	control.req <- func() {
		defer close(done)
		f()
	}
	<-done
}
