// Package poller waits for RDMA completion channels in Go's runtime
// netpoller.
//
// It is the providers' toolkit: each verbs provider builds its CQs'
// waiters (verbs.CQ.NewWaiter) from a Waiter, so how a wait sleeps and
// wakes stays inside the provider, and rdmanet only wait-polls.
//
// A completion channel (ibv_comp_channel) has a file descriptor that becomes
// readable when an armed CQ gets a completion. Waiter puts a dup of that fd
// (New), or the fd itself where its owner hands it over (Adopt), into the
// runtime poller the way mdlayher/socket does (non-blocking, os.NewFile,
// SyscallConn): every wait is rc.Read, so deadlines and "Close unblocks
// waiters" come from internal/poll, and no OS thread is held while a
// goroutine sleeps. Stop unblocks waits for good without closing the fd,
// for an owner that still uses it until it destroys the object. There is
// no epoll thread of our own and no LockOSThread handoff.
//
// Waiter runs the verbs wake-up protocol for its Source:
//
//	poll the CQ; if empty: arm it (ibv_req_notify_cq), then poll once more
//	(arm-then-poll: a completion that raced the arm is not missed); if still
//	empty: drain the channel (ibv_get_cq_event until EAGAIN; acks are
//	batched by the Source) and, if that consumed an event, start over
//	(the CQ is disarmed after an event); otherwise sleep in the netpoller.
//
// Draining until EAGAIN matters: the netpoller is edge-triggered, so a wait
// may only start when the fd has been read dry. The drain before a sleep is
// skipped when the CQ was armed within the same rc.Read: every event was
// drained before that arm (an event disarms the CQ, and Arm follows only a
// drain that found one), and internal/poll keeps an edge that comes after a
// Read began, so the fd is dry and the next event wakes the wait. That saves
// one read(2) (EAGAIN) per sleep; a wake then costs the arm, the read of the
// event and the read that says EAGAIN, against perftest's arm and blocking
// read. SetEagerDrain restores the drain before every sleep, for tests
// and benchmarks that measure the difference.
//
// An optional spin window polls the CQ for a while before arming and
// sleeping: it trades CPU for latency when messages arrive closely spaced.
package poller
