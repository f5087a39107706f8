//go:build linux

package soft

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Reading datagrams into the posted receives: the recvmmsg scratch, its
// slots pointed at the buffers, whole (in place) or scattered.

const (
	ctrlSize = 128 // IP_ORIGDSTADDR, IP_TTL, IP_TOS, SO_RXQ_OVFL, UDP_GRO: 32+24+24+24+24
	tailSize = 16  // room past the buffer: ImmDt, pad, ICRC
)

// firstScratch is how many datagrams the receive scratch first holds; a
// read that fills it doubles it, up to recvBatch (or the queue depth),
// so a conn that sees a stream pays for batches and one that does not
// keeps a few hundred bytes a slot.
const firstScratch = 8

// growScratch makes the recvmmsg scratch n slots; no read is in progress.
func (c *recvCQ) growScratch(n int) {
	c.msgs = make([]mmsghdr, n)
	c.iov = make([][5]unix.Iovec, n)
	c.hdr = make([][roce.HdrSize]byte, n)
	c.tail = make([][tailSize]byte, n)
	c.names = make([]unix.RawSockaddrInet4, n)
	c.ctrl = make([][ctrlSize]byte, n)
	c.kept = make([]rqEntry, n)
	c.initScratch()
}

// inPlaceSlack is what a posted buffer needs past GRH + MTU for the
// largest datagram to land in it whole: ImmDt, pad and ICRC.
const inPlaceSlack = roce.ImmDtSize + 3 + roce.ICRCSize

// recv points the first k scratch slots at the first k posted buffers and
// reads up to k datagrams. A buffer with room for the largest datagram
// gets it whole, in place: BTH and DETH in the last 20 bytes of the GRH
// area (rewritten as the GRH once they are read), the payload where it
// belongs, one iovec (the kernel's cheapest import). A shorter one gets
// the datagram scattered over the header scratch, the buffer and the tail
// scratch. The parts of each slot that never change (scratch iovecs, name
// and control buffers) were set once by initScratch: only the buffer's
// iovec, which of the slot's iovecs the read takes, and the lengths the
// kernel overwrites are set here (not msg_flags: recvmsg and recvmmsg
// write it whole for each datagram they return, as recvfromOne does, and
// nothing reads it for any other slot). A bare read asks
// for no control messages, and one datagram in place is read with
// recvfrom, the kernel's cheapest receive. A read of a socket with GRO
// gives each slot an overflow too, its row of the GRO area (gro.go), and
// room for the UDP_GRO message even when bare.
func (c *recvCQ) recv(fd, k int, bare bool) (int, error) {
	ctrlLen := ctrlSize
	if bare {
		ctrlLen = 0
	}
	var area *groArea
	if c.gro.on[c.sockIndex(fd)] {
		if err := c.gro.hold(); err != nil {
			return 0, err
		}
		area = c.gro.area
		if bare {
			// The UDP_GRO message alone (an int), which the kernel adds
			// only to a coalesced read.
			ctrlLen = unix.CmsgSpace(4)
		}
	}
	j := c.head
	for i := range k {
		if j == len(c.rq) {
			j = 0
		}
		buf := c.rq[j].buf
		j++
		m := &c.msgs[i]
		if len(buf) >= verbs.GRHSize+c.q.mtu+inPlaceSlack {
			region := buf[verbs.GRHSize-roce.HdrSize:]
			m.Hdr.Iov = &c.iov[i][3]
			m.Hdr.SetIovlen(1)
			if area != nil {
				// Cut to the largest datagram, so that the region fits
				// in front of the row's overflow (groPrefix).
				region = region[:roce.HdrSize+c.q.mtu+inPlaceSlack]
				setIov(&c.iov[i][4], area.row(i)[groPrefix:])
				m.Hdr.SetIovlen(2)
			}
			setIov(&c.iov[i][3], region)
		} else {
			setIov(&c.iov[i][1], buf[verbs.GRHSize:])
			m.Hdr.Iov = &c.iov[i][0]
			m.Hdr.SetIovlen(3)
			if area != nil {
				setIov(&c.iov[i][3], area.row(i)[groPrefix:])
				m.Hdr.SetIovlen(4)
			}
		}
		m.Hdr.Namelen = unix.SizeofSockaddrInet4
		m.Hdr.SetControllen(ctrlLen)
	}
	var got int
	var err error
	switch {
	case k == 1 && bare && c.msgs[0].Hdr.Iovlen == 1:
		return recvBare(fd, &c.msgs[0], unix.MSG_DONTWAIT) // no GRO: no area held
	case k == 1:
		got, err = recvOne(fd, &c.msgs[0], unix.MSG_DONTWAIT)
	default:
		got, err = recvmmsg(fd, c.msgs[:k], unix.MSG_DONTWAIT)
	}
	if got == 0 {
		c.gro.release()
		if s := c.sockIndex(fd); err == unix.EAGAIN && c.gro.on[s] && !c.gro.active[s] {
			c.gro.on[s] = false // read dry since GRO went off: no run left
		}
	}
	return got, err
}

// recvBare is recvfromOne, recvOne recvmsgOne; tests count their reads.
var recvBare, recvOne = recvfromOne, recvmsgOne

// sockIndex is 0 for the multicast socket's fd, 1 for the unicast one's.
func (c *recvCQ) sockIndex(fd int) int {
	if fd == c.q.uniFd {
		return 1
	}
	return 0
}

// initScratch sets the constant parts of the recvmmsg scratch slots.
func (c *recvCQ) initScratch() {
	for i := range c.msgs {
		setIov(&c.iov[i][0], c.hdr[i][:])
		setIov(&c.iov[i][2], c.tail[i][:])
		m := &c.msgs[i]
		m.Hdr.Name = (*byte)(unsafe.Pointer(&c.names[i]))
		m.Hdr.Control = &c.ctrl[i][0]
	}
}
