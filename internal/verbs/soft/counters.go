//go:build linux

package soft

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The software device's counters: what a device's port hw_counters are to
// rxe, the UDP MIB of the network namespace is to this backend. Its
// datagrams are the namespace's UDP datagrams to port 4791, and the
// kernel's UDP layer is what drops them when a socket buffer is full
// (UdpRcvbufErrors, also counted in UdpInErrors) or memory runs short
// (UdpMemErrors). UdpInErrors also counts the own multicast that a
// BlockSelfMulticastLoopback QP's socket filter drops (selffilter.go). The counts are the namespace's, shared by every socket
// in it, as a port's are shared by every QP on it; what this QP's own
// sockets dropped is exact in its drop counters (Drops.Overflow, from
// sk_drops). The MIB comes from /proc/thread-self/net/snmp, which shows
// the calling thread's namespace; a QP whose sockets live in another
// namespace than the caller's thread is read from its own (setns on a
// locked thread), or not at all where the process may not enter it.

// udpMIBNames are the UDP MIB's fields, in the order of /proc/net/snmp's
// Udp line (a kernel may lack the last ones). DeviceCounts names them as
// nstat does: "Udp" + the field.
var udpMIBNames = [...]string{
	"InDatagrams", "NoPorts", "InErrors", "OutDatagrams", "RcvbufErrors",
	"SndbufErrors", "InCsumErrors", "IgnoredMulti", "MemErrors",
}

// udpMIB is one reading of the UDP MIB; has says which fields the kernel
// has.
type udpMIB struct {
	v   [len(udpMIBNames)]uint64
	has [len(udpMIBNames)]bool
	ok  bool // read at all
}

// snmpPath is the calling thread's network namespace's SNMP MIBs.
const snmpPath = "/proc/thread-self/net/snmp"

// readUDPMIB reads the UDP MIB of the calling thread's network namespace.
// What could not be read is not in it: a file that does not open parses
// as empty (ok false), one whose read fails part way as far as it got.
func readUDPMIB() udpMIB {
	b, _ := os.ReadFile(snmpPath)
	return parseUDPMIB(b)
}

// parseUDPMIB finds the two "Udp:" lines of /proc/net/snmp, the names and
// the values, and reads the fields of udpMIBNames from them.
func parseUDPMIB(b []byte) udpMIB {
	var m udpMIB
	var names []byte
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("Udp: ")) // its newline too, which Fields skips
		if !ok {
			continue
		}
		if names == nil {
			names = rest
			continue
		}
		nf, vf := bytes.Fields(names), bytes.Fields(rest)
		for i := range min(len(nf), len(vf)) {
			j := fieldIndex(nf[i])
			if j < 0 {
				continue
			}
			if v, err := strconv.ParseUint(string(vf[i]), 10, 64); err == nil {
				m.v[j], m.has[j] = v, true
				m.ok = true
			}
		}
		break
	}
	return m
}

func fieldIndex(name []byte) int {
	for j, n := range udpMIBNames {
		if string(name) == n {
			return j
		}
	}
	return -1
}

// deltas returns now - base by nstat name, for the fields now has (one
// that went backwards counts from 0); nil when now was not read.
func (now udpMIB) deltas(base udpMIB) map[string]uint64 {
	if !now.ok {
		return nil
	}
	out := make(map[string]uint64, len(udpMIBNames))
	for j, n := range udpMIBNames {
		if !now.has[j] {
			continue
		}
		b := base.v[j]
		if !base.has[j] || now.v[j] < b {
			b = 0
		}
		out["Udp"+n] = now.v[j] - b
	}
	return out
}

// noteCreated takes the base of the device counters: the QP's namespace's
// UDP MIB as the QP is made (its sockets are the calling thread's
// namespace's). Reading the MIB costs about 8 µs (the kernel prints all
// of /proc/net/snmp), a seventh of a ListenMulticast + Close, so QPs made
// within mibShare of each other in one namespace share a reading.
func (q *QP) noteCreated() {
	cookie := netnsCookie(q.uniFd) // netview.go
	ok := cookie != 0
	now := mibClock()
	mibShared.Lock()
	defer mibShared.Unlock()
	if ok && mibShared.ok && mibShared.cookie == cookie && now.Sub(mibShared.at) < mibShare {
		q.fault.mib0 = mibShared.m
		return
	}
	q.fault.mib0 = readUDPMIB()
	mibShared.m, mibShared.at = q.fault.mib0, now
	mibShared.cookie, mibShared.ok = cookie, ok && q.fault.mib0.ok
}

// mibShare is how old a reading of a namespace's UDP MIB a new QP takes
// as its base: counts from up to this long before the QP was made may
// show in its DeviceCounts.
const mibShare = 10 * time.Millisecond

// mibClock is time.Now; tests replace it.
var mibClock = time.Now

// mibShared is the last reading taken by noteCreated, and the namespace
// it is of.
var mibShared struct {
	sync.Mutex
	m      udpMIB
	at     time.Time
	cookie uint64
	ok     bool
}

// DeviceCounts returns how much the UDP MIB of the QP's network namespace
// grew since the QP was created, under nstat's names (UdpRcvbufErrors,
// UdpInErrors, UdpInDatagrams, ...): the software device's counters,
// shared by every socket in the namespace (see above). Nil when the MIB
// cannot be read, or the QP is closed.
func (q *QP) DeviceCounts() map[string]uint64 {
	c := &q.rcq
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !q.fault.mib0.ok {
		return nil
	}
	nsfd := q.otherNetns()
	if nsfd < 0 {
		return readUDPMIB().deltas(q.fault.mib0)
	}
	defer unix.Close(nsfd)
	now, ok := readUDPMIBIn(nsfd)
	if !ok {
		return nil
	}
	return now.deltas(q.fault.mib0)
}

// otherNetns is an fd of the network namespace of the QP's sockets
// (SIOCGSKNS) when the calling thread is in another, else -1: the same
// namespace, or one that cannot be told apart from it (then the caller's
// is assumed). c.mu is held.
func (q *QP) otherNetns() int {
	fd, err := unix.IoctlRetInt(q.uniFd, unix.SIOCGSKNS)
	if err != nil {
		return noFd // a kernel before 4.10: assume the caller's
	}
	var qs, ts unix.Stat_t
	if unix.Fstat(fd, &qs) != nil || unix.Stat("/proc/thread-self/ns/net", &ts) != nil {
		unix.Close(fd)
		return noFd
	}
	if qs.Ino == ts.Ino && qs.Dev == ts.Dev {
		unix.Close(fd)
		return noFd
	}
	return fd
}

// readUDPMIBIn reads the UDP MIB of the network namespace nsfd on a
// thread of its own, which enters the namespace and leaves it again; a
// thread that cannot leave it ends with its goroutine.
func readUDPMIBIn(nsfd int) (udpMIB, bool) {
	type result struct {
		m  udpMIB
		ok bool
	}
	ch := make(chan result) // received below, always
	go func() {
		runtime.LockOSThread()
		back, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{}
			return
		}
		defer back.Close()
		if unix.Setns(nsfd, unix.CLONE_NEWNET) != nil {
			runtime.UnlockOSThread()
			ch <- result{}
			return
		}
		m := readUDPMIB()
		if unix.Setns(int(back.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and ends with this goroutine
		ch <- result{m, m.ok}
	}()
	r := <-ch
	return r.m, r.ok
}
