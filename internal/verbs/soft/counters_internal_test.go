//go:build linux

package soft

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// A UDP MIB counter is a u64: values past 2^63 parse too.
func TestParseUDPMIBFullWidth(t *testing.T) {
	got := ParseUDPMIB([]byte("Udp: InDatagrams NoPorts\nUdp: 18446744073709551615 9223372036854775808\n"))
	if got["UdpInDatagrams"] != 1<<64-1 || got["UdpNoPorts"] != 1<<63 {
		t.Errorf("ParseUDPMIB = %v, want UdpInDatagrams 2^64-1, UdpNoPorts 2^63", got)
	}
}

// DeviceCounts' deltas: a field that did not change since the base is 0,
// one that grew counts from the base, one that went backwards (or that
// the base lacks) from 0, one the kernel lacks is left out, and a reading
// not taken is nil.
func TestUDPMIBDeltas(t *testing.T) {
	mib := func(vs ...int) udpMIB {
		var m udpMIB
		for j, v := range vs {
			if v >= 0 {
				m.v[j], m.has[j] = uint64(v), true
			}
		}
		m.ok = true
		return m
	}
	base := mib(5, 7, 9, -1)
	now := mib(5, 10, 4, 3, -1)
	require.Equal(t, map[string]uint64{"UdpInDatagrams": 0, "UdpNoPorts": 3, "UdpInErrors": 4, "UdpOutDatagrams": 3}, now.deltas(base))
	require.Nil(t, udpMIB{}.deltas(base))
}

// A QP made while the last reading of its namespace's UDP MIB is fresh
// takes that reading as its base; one in another namespace reads its own.
func TestMIBReadingShared(t *testing.T) {
	q := internalQP(t, verbs.QPConfig{})
	cookie := netnsCookie(q.uniFd)
	if cookie == 0 {
		t.Skip("no SO_NETNS_COOKIE: QPs read the MIB each")
	}
	marker := udpMIB{ok: true}
	marker.v[0], marker.has[0] = 1<<62+7, true
	set := func(c uint64) {
		mibShared.Lock()
		// Ahead of now, so that the reading is fresh however slow the
		// machine is.
		mibShared.m, mibShared.at, mibShared.cookie, mibShared.ok = marker, time.Now().Add(time.Hour), c, true
		mibShared.Unlock()
	}
	t.Cleanup(func() {
		mibShared.Lock()
		mibShared.ok = false
		mibShared.Unlock()
	})

	set(cookie)
	q.noteCreated()
	if q.fault.mib0 != marker {
		t.Errorf("same namespace, fresh reading: base %+v, want the shared reading %+v", q.fault.mib0, marker)
	}
	set(cookie + 1)
	q.noteCreated()
	if q.fault.mib0 == marker {
		t.Errorf("another namespace's reading taken as the base")
	}
	if !q.fault.mib0.ok {
		t.Errorf("own reading: MIB not read")
	}
}

// The multicast socket's overflow is its sk_drops less what the self
// filter dropped, never below 0: sk_drops read before the kernel counted
// the QP's own datagrams that the QP counted already (the two counters
// race) shows no overflow, not a wrapped one or a made-up one.
func TestMcOverflowNotBelowSelfLooped(t *testing.T) {
	var q QP
	q.selfLooped.Store(5)
	q.sockDrops[0].Store(3)
	require.Zero(t, q.mcOverflow(), "sk_drops 3, self looped 5: want overflow 0")
	q.sockDrops[0].Store(9)
	require.Equal(t, uint32(4), q.mcOverflow(), "sk_drops 9, self looped 5")
}

// A reading of a namespace's UDP MIB is shared for 10 ms (the package
// doc's): a QP made 10 ms less a nanosecond after it takes it as its
// base, one made 10 ms after reads its own.
func TestMIBReadingSharedFor10ms(t *testing.T) {
	q := internalQP(t, verbs.QPConfig{})
	cookie := netnsCookie(q.uniFd)
	if cookie == 0 {
		t.Skip("no SO_NETNS_COOKIE: QPs read the MIB each")
	}
	marker := udpMIB{ok: true}
	marker.v[0], marker.has[0] = 1<<62+7, true
	t0 := time.Now()
	orig := mibClock
	t.Cleanup(func() {
		mibClock = orig
		mibShared.Lock()
		mibShared.ok = false
		mibShared.Unlock()
	})
	for _, c := range []struct {
		age    time.Duration
		shared bool
	}{{10*time.Millisecond - 1, true}, {10 * time.Millisecond, false}} {
		mibShared.Lock()
		mibShared.m, mibShared.at, mibShared.cookie, mibShared.ok = marker, t0, cookie, true
		mibShared.Unlock()
		mibClock = func() time.Time { return t0.Add(c.age) }
		q.noteCreated()
		if shared := q.fault.mib0 == marker; shared != c.shared {
			t.Errorf("a QP made %v after the reading: shared %v, want %v", c.age, shared, c.shared)
		}
	}
}
