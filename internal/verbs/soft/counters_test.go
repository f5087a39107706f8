package soft_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/verbs"
	"github.com/go-rdma/rdmanet/internal/verbs/soft"
)

// TestParseUDPMIB reads the Udp lines of /proc/net/snmp as kernels print
// them, old ones with fewer fields included.
func TestParseUDPMIB(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want map[string]uint64
	}{
		{"6.1", "Ip: Forwarding DefaultTTL\nIp: 1 64\n" +
			"Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n" +
			"Udp: 10 1 7 12 6 0 0 3 0\n" +
			"UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n" +
			"UdpLite: 99 99 99 99 99 99 99 99 99\n",
			map[string]uint64{"UdpInDatagrams": 10, "UdpNoPorts": 1, "UdpInErrors": 7, "UdpOutDatagrams": 12,
				"UdpRcvbufErrors": 6, "UdpSndbufErrors": 0, "UdpInCsumErrors": 0, "UdpIgnoredMulti": 3, "UdpMemErrors": 0}},
		{"3.10, no IgnoredMulti or MemErrors", "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors\n" +
			"Udp: 5 0 2 5 2 0 0\n",
			map[string]uint64{"UdpInDatagrams": 5, "UdpNoPorts": 0, "UdpInErrors": 2, "UdpOutDatagrams": 5,
				"UdpRcvbufErrors": 2, "UdpSndbufErrors": 0, "UdpInCsumErrors": 0}},
		{"unknown field skipped", "Udp: InDatagrams Future RcvbufErrors\nUdp: 1 2 3\n",
			map[string]uint64{"UdpInDatagrams": 1, "UdpRcvbufErrors": 3}},
		{"no Udp line", "Ip: Forwarding\nIp: 1\n", nil},
		{"names without values", "Udp: InDatagrams\n", nil},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, soft.ParseUDPMIB([]byte(c.in)), c.name)
	}
}

// TestDeviceCountsSeeRcvbufErrors: datagrams that find a receiver's socket
// buffer full are dropped by the kernel's UDP layer, which counts them in
// the namespace's UDP MIB; the QP's device counters show that growth
// (UdpRcvbufErrors, also in UdpInErrors), the same count as the QP's own
// overflow drops when nothing else in the namespace drops.
func TestDeviceCountsSeeRcvbufErrors(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	rx := newEndpoint(t, verbs.QPConfig{})
	tx := newEndpoint(t, verbs.QPConfig{})
	const group = "239.80.1.1"
	m, _ := rx.join(group, false)
	_, ah := tx.join(group, true)
	before := rx.qp.DeviceCounts()
	require.NotNil(t, before, "no device counters: is /proc/thread-self/net/snmp readable?")
	assert.Zero(t, before["UdpRcvbufErrors"], "nothing dropped yet")

	// No receive posted: the multicast socket's buffer (4 MiB at most)
	// fills and the kernel drops the rest.
	const n, size = 8000, 1024
	for range n {
		tx.send(ah, m.RemoteQPN, make([]byte, size), 0, 0)
	}
	d := rx.qp.DeviceCounts()
	overflow := rx.qp.Drops().Overflow
	t.Logf("after %d datagrams of %d B: device %v; the QP's overflow %d", n, size, d, overflow)
	require.Positive(t, overflow, "the QP saw no overflow: the flood did not fill the socket buffer")
	assert.Equal(t, overflow, d["UdpRcvbufErrors"], "the namespace's RcvbufErrors: the one socket that dropped")
	assert.GreaterOrEqual(t, d["UdpInErrors"], d["UdpRcvbufErrors"], "RcvbufErrors count in InErrors too")
	assert.GreaterOrEqual(t, d["UdpOutDatagrams"], uint64(n), "the sends")
	_, has := rx.qp.DropCounts()[verbs.DropDeviceOverflow]
	assert.False(t, has, "the namespace's counts are not the QP's drops: Drops.Overflow is exact")
}

// TestDeviceCountsAfterClose: a closed QP has no device counters.
func TestDeviceCountsAfterClose(t *testing.T) {
	p, err := verbs.Lookup(verbs.Software)
	require.NoError(t, err)
	id, err := p.Bind(verbs.BindConfig{})
	require.NoError(t, err)
	qp, err := id.CreateQP(verbs.QPConfig{})
	require.NoError(t, err)
	require.NotNil(t, qp.DeviceCounts())
	require.NoError(t, id.Close())
	assert.Nil(t, qp.DeviceCounts())
}
