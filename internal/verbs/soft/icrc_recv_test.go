//go:build linux

package soft_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/roce"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// The receive side checks the ICRC over every byte it covers: one byte
// changed anywhere in BTH (but its masked resv8a), DETH, payload, pad or
// the ICRC itself drops the datagram as DropBadICRC, and nothing else; a
// change in resv8a, which the ICRC masks, is accepted. Both read paths
// run it (a QP that reads control messages, and a GRHAddressesOnly one).
// The datagram's other checks (Q_Key, P_Key, opcode, TVer, QPN) pass, so
// only the ICRC can drop it. (A change in the destination QPN is caught as
// not-for-us first, one in P_Key or Q_Key by their own checks.)
func TestICRCCoversEveryByte(t *testing.T) {
	good := roce.Header{Opcode: roce.OpUDSendOnly, PKey: 0xFFFF, DestQPN: verbs.MulticastQPN, PSN: 0x123456, QKey: verbs.DefaultQKey, SrcQPN: 0x4242}
	const hdr = 12 + 8                 // BTH, DETH
	payload := []byte("icrc payload!") // 13 bytes: 3 of pad
	const pad = 3
	cases := []struct {
		name   string
		off    func(n int) int // the byte to change, from n, the datagram's length
		flip   byte
		accept bool
	}{
		{"BTH-migreq", func(int) int { return 1 }, 0x40, false}, // M bit (SE, pad count and TVer stay)
		{"BTH-resv8a", func(int) int { return 4 }, 0xFF, true},  // masked by the ICRC
		{"BTH-ack-resv7", func(int) int { return 8 }, 0x01, false},
		{"BTH-PSN", func(int) int { return 11 }, 0x01, false},
		{"DETH-resv", func(int) int { return 16 }, 0x01, false},
		{"DETH-srcQP", func(int) int { return 19 }, 0x01, false},
		{"payload-first", func(int) int { return hdr }, 0x01, false},
		{"payload-last", func(int) int { return hdr + 12 }, 0x80, false},
		{"pad", func(n int) int { return n - roce.ICRCSize - 1 }, 0x01, false},
		{"ICRC-first", func(n int) int { return n - roce.ICRCSize }, 0x01, false},
		{"ICRC-last", func(n int) int { return n - 1 }, 0x80, false},
	}
	for _, only := range []bool{false, true} {
		t.Run(fmt.Sprintf("GRHAddressesOnly=%v", only), func(t *testing.T) {
			a := newEndpoint(t, verbs.QPConfig{GRHAddressesOnly: only})
			a.postRecvs(0, 16)
			a.join("239.201.19.1", false)
			group := [4]byte{239, 201, 19, 1}
			r := newRawSender(t)
			for _, c := range cases {
				dg := r.datagram(good, payload, group)
				require.Equal(t, hdr+len(payload)+pad+roce.ICRCSize, len(dg))
				dg[c.off(len(dg))] ^= c.flip
				before := a.qp.Drops()
				r.send(t, dg, group)
				r.send(t, r.datagram(good, []byte("marker"), group), group)
				want := 1 // the marker
				if c.accept {
					want = 2
				}
				wcs := a.recv(want, 2*time.Second)
				require.Len(t, wcs, want, "%s: datagrams through", c.name)
				if c.accept {
					require.Equal(t, payload, a.buf(wcs[0])[verbs.GRHSize:verbs.GRHSize+len(payload)], "%s: the changed datagram", c.name)
				}
				require.Equal(t, []byte("marker"), a.buf(wcs[want-1])[verbs.GRHSize:verbs.GRHSize+6], "%s: the marker after it", c.name)
				for _, wc := range wcs {
					a.postRecvs(int(wc.WRID), 1)
				}
				after := a.qp.Drops()
				wantDrops := before
				if !c.accept {
					wantDrops.BadICRC++
				}
				require.Equal(t, wantDrops, after, "%s: drops", c.name)
			}
		})
	}
}
