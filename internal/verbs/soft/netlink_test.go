//go:build linux

package soft

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/go-rdma/rdmanet/internal/infiniband"
	"github.com/go-rdma/rdmanet/internal/testenv"
)

// A recvfrom that fails returns its errno. rtnetlink answers no message
// of a type below NLMSG_MIN_TYPE without NLM_F_ACK, so a non-blocking
// socket finds nothing to read: EAGAIN.
func TestNetlinkDumpRecvError(t *testing.T) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 1<<16)
	err = netlinkDump(fd, buf, unix.NLMSG_NOOP, 1, func(*syscall.NetlinkMessage) error { return nil })
	if !errors.Is(err, unix.EAGAIN) {
		t.Errorf("netlinkDump with no answer: %v, want EAGAIN from recvfrom", err)
	}
}

// forgedAnswers returns a netlink socket with answers queued, each a
// datagram sent from another netlink socket (root may send to a user
// port), for a dump of NLMSG_NOOP, which the kernel answers with nothing
// (TestNetlinkDumpRecvError): the forged answers are the only ones.
func forgedAnswers(t *testing.T, answers ...[]byte) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: a netlink message to a user port needs CAP_NET_ADMIN")
	}
	socket := func() int {
		t.Helper()
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		require.NoError(t, err)
		t.Cleanup(func() { unix.Close(fd) })
		require.NoError(t, unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}))
		return fd
	}
	fd, forger := socket(), socket()
	sa, err := unix.Getsockname(fd)
	require.NoError(t, err)
	for _, a := range answers {
		require.NoError(t, unix.Sendto(forger, a, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: sa.(*unix.SockaddrNetlink).Pid}))
	}
	return fd
}

// nlHeader is a netlink message header alone, its length field n.
func nlHeader(n uint32, typ uint16, seq uint32) []byte {
	var h [unix.NLMSG_HDRLEN]byte
	binary.NativeEndian.PutUint32(h[0:4], n)
	binary.NativeEndian.PutUint16(h[4:6], typ)
	binary.NativeEndian.PutUint32(h[8:12], seq)
	return h[:]
}

// An answer of a header alone (16 bytes: an NLMSG_DONE with no error
// word) is a message, not a short read: it ends the dump. The kernel's
// NLMSG_DONE carries the word, so the answer is forged.
func TestNetlinkDumpHeaderOnlyAnswer(t *testing.T) {
	const seq = 7
	fd := forgedAnswers(t, nlHeader(unix.NLMSG_HDRLEN, unix.NLMSG_DONE, seq))
	buf := make([]byte, 1<<16)
	var msgs int
	err := netlinkDump(fd, buf, unix.NLMSG_NOOP, seq, func(*syscall.NetlinkMessage) error { msgs++; return nil })
	require.NoError(t, err, "a dump answered by a header-only NLMSG_DONE")
	require.Zero(t, msgs, "NLMSG_DONE handed on as a message")
}

// An answer that does not parse (a link message cut short of the length
// its header gives) ends the dump with an error; it is not skipped for
// the answers after it (here an NLMSG_DONE).
func TestNetlinkDumpBadAnswer(t *testing.T) {
	const seq = 8
	cut := linkDump(7, syscall.ARPHRD_ETHER, nlAttr{syscall.IFLA_MTU, binary.NativeEndian.AppendUint32(nil, 1500)})[:syscall.NLMSG_HDRLEN+4]
	fd := forgedAnswers(t, cut, nlHeader(unix.NLMSG_HDRLEN, unix.NLMSG_DONE, seq))
	buf := make([]byte, 1<<16)
	var msgs int
	err := netlinkDump(fd, buf, unix.NLMSG_NOOP, seq, func(*syscall.NetlinkMessage) error { msgs++; return nil })
	require.ErrorIs(t, err, syscall.EINVAL, "a dump answered by a message cut short")
	require.Contains(t, err.Error(), "parsenetlinkmessage")
	require.Zero(t, msgs)
}

// withSeq sets a netlink message's sequence number.
func withSeq(msg []byte, seq uint32) []byte {
	binary.NativeEndian.PutUint32(msg[8:12], seq)
	return msg
}

// withBadAttr appends to a netlink message an attribute claiming 64
// bytes where 4 follow, and makes its header's length cover it: the
// message parses, its attributes do not.
func withBadAttr(msg []byte) []byte {
	msg = append(msg, 64, 0, 3, 0)
	binary.NativeEndian.PutUint32(msg[0:4], uint32(len(msg)))
	return msg
}

// A view's dump whose link or address message does not parse fails: the
// view is not kept without that link or address. The bad message is
// forged, queued before the kernel's answer (a link dump is sequence 1,
// an address dump 2).
func TestNetlinkViewBadAnswer(t *testing.T) {
	link := withSeq(withBadAttr(linkDump(7, syscall.ARPHRD_ETHER)), 1)
	addr := nlHeader(0, syscall.RTM_NEWADDR, 2)
	addr = append(addr, syscall.AF_INET, 32, 0, 0, 7, 0, 0, 0)
	addr = withBadAttr(addr)
	for _, c := range []struct {
		name    string
		answers [][]byte
	}{
		{"link", [][]byte{link}},
		{"address", [][]byte{append(nlHeader(unix.NLMSG_HDRLEN+4, unix.NLMSG_DONE, 1), 0, 0, 0, 0), addr}},
	} {
		fd := forgedAnswers(t, c.answers...)
		v, err := dumpNetlinkView(fd)
		require.Nil(t, v, c.name)
		require.ErrorContains(t, err, "parsenetlinkrouteattr", c.name)
	}
}

// A link or address message whose attributes do not parse is an error,
// not a nameless link or a missing address.
func TestNetlinkBadAttrs(t *testing.T) {
	// An attribute claiming 64 bytes where 4 follow.
	bad := []byte{64, 0, 3, 0}
	link := &syscall.NetlinkMessage{
		Header: syscall.NlMsghdr{Type: syscall.RTM_NEWLINK},
		Data:   append(make([]byte, syscall.SizeofIfInfomsg), bad...),
	}
	addr := &syscall.NetlinkMessage{
		Header: syscall.NlMsghdr{Type: syscall.RTM_NEWADDR},
		Data:   append([]byte{syscall.AF_INET, 8, 0, 0, 1, 0, 0, 0}, bad...),
	}
	var v netlinkView
	if err := v.addLink(link); err == nil {
		t.Errorf("addLink: no error; links %+v", v.links)
	}
	if err := v.addAddr(addr); err == nil {
		t.Errorf("addAddr: no error")
	}
}

// addLink reads a link's attributes as parseNetdev does, the one-byte
// IFLA_OPERSTATE included (the view's state is what Bind refuses a down
// netdev by).
func TestNetlinkViewLinkAttrs(t *testing.T) {
	msgs, err := syscall.ParseNetlinkMessage(linkDump(7, syscall.ARPHRD_ETHER,
		nlAttr{syscall.IFLA_IFNAME, []byte("veth7\x00")},
		nlAttr{syscall.IFLA_MTU, binary.NativeEndian.AppendUint32(nil, 1500)},
		nlAttr{iflaOperState, []byte{2}})) // IF_OPER_DOWN
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	var v netlinkView
	require.NoError(t, v.addLink(&msgs[0]))
	require.Len(t, v.links, 1)
	l := v.links[0]
	require.Equal(t, "veth7", l.ifi.Name)
	require.Equal(t, 1500, l.ifi.MTU)
	require.Equal(t, "down", l.info.operState)
}

// addLink skips an IFLA_MTU shorter than its 4 bytes and an empty
// IFLA_OPERSTATE, as parseNetdev does ("short MTU and empty state"): the
// link keeps MTU 0 and state "unknown" (only a forged message has them).
func TestNetlinkViewShortAttrs(t *testing.T) {
	mtu := binary.NativeEndian.AppendUint32(nil, 1500)
	msgs, err := syscall.ParseNetlinkMessage(linkDump(7, syscall.ARPHRD_ETHER,
		nlAttr{syscall.IFLA_IFNAME, []byte("veth7\x00")},
		nlAttr{syscall.IFLA_MTU, mtu[:3]},
		nlAttr{iflaOperState, nil}))
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	var v netlinkView
	require.NotPanics(t, func() { require.NoError(t, v.addLink(&msgs[0])) })
	require.Len(t, v.links, 1)
	l := v.links[0]
	require.Equal(t, "veth7", l.ifi.Name)
	require.Zero(t, l.ifi.MTU, "a 3-byte MTU read")
	require.Zero(t, l.info.mtu, "a 3-byte MTU read")
	require.Equal(t, "unknown", l.info.operState)
}

// An RTM_NEWLINK message of an ifinfomsg and no attribute is a link (the
// header names its index, type and flags; what attributes would say keeps
// its defaults); one shorter than an ifinfomsg is skipped. The kernel
// always sends IFLA_IFNAME, so only a forged message reaches the first.
func TestNetlinkLinkWithoutAttrs(t *testing.T) {
	data := make([]byte, syscall.SizeofIfInfomsg)
	binary.NativeEndian.PutUint16(data[2:4], syscall.ARPHRD_ETHER)
	binary.NativeEndian.PutUint32(data[4:8], 7)
	binary.NativeEndian.PutUint32(data[8:12], syscall.IFF_UP)
	var v netlinkView
	for _, d := range [][]byte{data, data[:syscall.SizeofIfInfomsg-1]} {
		m := &syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: syscall.RTM_NEWLINK}, Data: d}
		if err := v.addLink(m); err != nil {
			t.Fatalf("addLink of %d bytes: %v", len(d), err)
		}
	}
	if len(v.links) != 1 {
		t.Fatalf("links %+v, want the one of the whole ifinfomsg", v.links)
	}
	l := v.links[0]
	if l.ifi.Index != 7 || l.ifi.Flags&net.FlagUp == 0 || l.ifi.Name != "" || l.ifi.MTU != 0 || l.info.operState != "unknown" ||
		l.info.kind != infiniband.NetdevEthernet {
		t.Errorf("link %+v, want index 7, up, Ethernet, no name, no MTU, operstate unknown", l)
	}
}

// addrMsg is an RTM_NEWADDR message of family fam on link index with one
// attribute of type typ holding ip.
func addrMsg(fam uint8, index uint32, typ uint16, ip net.IP) *syscall.NetlinkMessage {
	data := []byte{fam, 64, 0, 0, byte(index), byte(index >> 8), byte(index >> 16), byte(index >> 24)}
	l := 4 + len(ip)
	data = append(data, byte(l), byte(l>>8), byte(typ), byte(typ>>8))
	data = append(data, ip...)
	return &syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: syscall.RTM_NEWADDR}, Data: data}
}

// IPv4 and IPv6 addresses are both kept, each of its link.
func TestNetlinkAddrFamilies(t *testing.T) {
	var v netlinkView
	for _, m := range []*syscall.NetlinkMessage{
		addrMsg(syscall.AF_INET, 3, syscall.IFA_ADDRESS, net.IPv4(10, 0, 0, 1).To4()),
		addrMsg(syscall.AF_INET6, 3, syscall.IFA_ADDRESS, net.ParseIP("fd00::1")),
		addrMsg(syscall.AF_INET6, 4, syscall.IFA_ADDRESS, net.IPv4(10, 0, 0, 2).To4()), // 4 bytes: not IPv6
	} {
		if err := v.addAddr(m); err != nil {
			t.Fatalf("addAddr: %v", err)
		}
	}
	if len(v.addrs) != 2 || !v.addrs[0].ip.Equal(net.IPv4(10, 0, 0, 1)) || !v.addrs[1].ip.Equal(net.ParseIP("fd00::1")) || v.addrs[1].index != 3 {
		t.Errorf("addrs = %+v, want 10.0.0.1 and fd00::1 on link 3", v.addrs)
	}
}

// Without a link named lo, the loopback link is the first with
// IFF_LOOPBACK.
func TestNetlinkLoopbackByFlag(t *testing.T) {
	v := netlinkView{links: []netlinkLink{
		{ifi: net.Interface{Index: 1, Name: "eth0", Flags: net.FlagUp}},
		{ifi: net.Interface{Index: 2, Name: "lo0", Flags: net.FlagUp | net.FlagLoopback}},
	}}
	if l := v.loopback(); l == nil || l.ifi.Name != "lo0" {
		t.Errorf("loopback() = %+v, want lo0", l)
	}
	v.links = v.links[:1]
	if l := v.loopback(); l != nil {
		t.Errorf("no loopback link: loopback() = %+v, want nil", l.ifi)
	}
}

// The netdev lookup reads the operational state rtnetlink reports (a
// one-byte IFLA_OPERSTATE): a veth that is down is "down", which makes
// it unusable, not the "unknown" a missing state would leave.
func TestNetlinkOperState(t *testing.T) {
	if !testenv.InOwnNetns(t, "ip link add os0 type veth peer name os1") {
		return
	}
	ifi, err := net.InterfaceByName("os0")
	if err != nil {
		t.Fatalf("the veth: %v", err)
	}
	n, err := netlinkNetdev(ifi.Index)
	if err != nil {
		t.Fatalf("netlinkNetdev(os0): %v", err)
	}
	if n.operState != "down" || n.unusable() != "operstate down" {
		t.Errorf("os0, down: operState %q, unusable %q; want down", n.operState, n.unusable())
	}
}

// nlAttr is one rtnetlink attribute: its type and value.
type nlAttr struct {
	typ uint16
	val []byte
}

// linkDump is an RTM_GETLINK dump's answer of one RTM_NEWLINK message:
// netdev index of link type arphrd with attrs.
func linkDump(index int32, arphrd uint16, attrs ...nlAttr) []byte {
	data := make([]byte, syscall.SizeofIfInfomsg)
	binary.NativeEndian.PutUint16(data[2:4], arphrd)
	binary.NativeEndian.PutUint32(data[4:8], uint32(index))
	for _, a := range attrs {
		var h [4]byte
		binary.NativeEndian.PutUint16(h[0:2], uint16(4+len(a.val)))
		binary.NativeEndian.PutUint16(h[2:4], a.typ)
		data = append(append(data, h[:]...), a.val...)
		for len(data)%4 != 0 {
			data = append(data, 0)
		}
	}
	msg := make([]byte, syscall.NLMSG_HDRLEN, syscall.NLMSG_HDRLEN+len(data))
	binary.NativeEndian.PutUint32(msg[0:4], uint32(syscall.NLMSG_HDRLEN+len(data)))
	binary.NativeEndian.PutUint16(msg[4:6], syscall.RTM_NEWLINK)
	return append(msg, data...)
}

// parseNetdev reads the kind, MTU and state of the netdev asked for, and
// fails, naming why, on an answer that does not parse.
func TestParseNetdev(t *testing.T) {
	mtu := binary.NativeEndian.AppendUint32(nil, 1500)
	up := []byte{6}
	other := linkDump(2, syscall.ARPHRD_LOOPBACK, nlAttr{syscall.IFLA_MTU, binary.NativeEndian.AppendUint32(nil, 65536)})
	for _, tc := range []struct {
		name    string
		tab     []byte
		want    netdevInfo
		syscall string // the *os.SyscallError wanted, or "" for none
		noDev   bool   // an error naming no such netdev
	}{
		{name: "ethernet up", tab: append(other, linkDump(7, syscall.ARPHRD_ETHER, nlAttr{syscall.IFLA_MTU, mtu}, nlAttr{iflaOperState, up})...),
			want: netdevInfo{kind: infiniband.NetdevEthernet, mtu: 1500, operState: "up"}},
		{name: "no attributes", tab: linkDump(7, syscall.ARPHRD_INFINIBAND),
			want: netdevInfo{kind: infiniband.NetdevIPoIB, operState: "unknown"}},
		{name: "short MTU and empty state", tab: linkDump(7, syscall.ARPHRD_ETHER, nlAttr{syscall.IFLA_MTU, mtu[:3]}, nlAttr{iflaOperState, nil}),
			want: netdevInfo{kind: infiniband.NetdevEthernet, operState: "unknown"}},
		{name: "no such index", tab: other, noDev: true},
		{name: "truncated message", tab: linkDump(7, syscall.ARPHRD_ETHER, nlAttr{syscall.IFLA_MTU, mtu})[:syscall.NLMSG_HDRLEN+4], syscall: "parsenetlinkmessage"},
		{name: "attribute past the message", tab: func() []byte {
			b := linkDump(7, syscall.ARPHRD_ETHER, nlAttr{syscall.IFLA_MTU, mtu})
			binary.NativeEndian.PutUint16(b[syscall.NLMSG_HDRLEN+syscall.SizeofIfInfomsg:], 64)
			return b
		}(), syscall: "parsenetlinkrouteattr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseNetdev(tc.tab, 7)
			switch {
			case tc.syscall != "":
				var se *os.SyscallError
				require.ErrorAs(t, err, &se, "got %+v, %v; want a %s error", got, err, tc.syscall)
				require.Equal(t, tc.syscall, se.Syscall, "got error %v, want one from %s", err, tc.syscall)
			case tc.noDev:
				require.ErrorContains(t, err, "no netdev with index 7", "got %+v, %v; want no such netdev", got, err)
			default:
				require.NoError(t, err)
				require.Equal(t, tc.want, got, "got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// operStateName names each RFC 2863 state as sysfs's operstate does.
func TestOperStateName(t *testing.T) {
	want := []string{"unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up", "unknown"}
	for s, w := range want {
		require.Equal(t, w, operStateName(uint8(s)), "got operStateName(%d) %q, want %q", s, operStateName(uint8(s)), w)
	}
	require.Equal(t, "unknown", operStateName(255), "got operStateName(255) %q, want unknown", operStateName(255))
}
