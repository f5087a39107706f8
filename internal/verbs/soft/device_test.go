//go:build linux

package soft

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/go-rdma/rdmanet/internal/verbs"
)

// A netdev with a MAC has the MAC's EUI-64 as its node GUID: the
// universal/local bit flipped, FF FE in the middle.
func TestNodeGUIDIsEUI64(t *testing.T) {
	ifi := &net.Interface{Name: "eth9", HardwareAddr: net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}}
	if got, want := nodeGUID(ifi), uint64(0x505400FFFE123456); got != want {
		t.Errorf("nodeGUID(52:54:00:12:34:56) = %#x, want %#x", got, want)
	}
	// No MAC (lo): a hash of the name, another name's another.
	lo, other := &net.Interface{Name: "lo"}, &net.Interface{Name: "lo2"}
	if nodeGUID(lo) == nodeGUID(other) {
		t.Errorf("nodeGUID without a MAC: lo and lo2 both %#x", nodeGUID(lo))
	}
}

// A port's largest MTU is RoCE's, 4096, whatever the netdev's.
func TestPortMaxMTU(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatalf("lo: %v", err)
	}
	if got := portAttr(lo).MaxMTU; got != 4096 {
		t.Errorf("MaxMTU = %d, want 4096", got)
	}
}

// A MAC is zero only when all six bytes are: one whose only non-zero
// byte is any one of them has its EUI-64, and the zero MAC is no MAC.
func TestNodeGUIDOfMACWithOneByteSet(t *testing.T) {
	for _, v := range []byte{0x01, 0x10} {
		for i := range 6 {
			m := make(net.HardwareAddr, 6)
			m[i] = v
			var want uint64 = 0x020000FFFE000000 // the U/L bit of byte 0 flipped
			shift := [6]uint{56, 48, 40, 16, 8, 0}[i]
			want ^= uint64(v) << shift
			if got := nodeGUID(&net.Interface{Name: "eth9", HardwareAddr: m}); got != want {
				t.Errorf("nodeGUID(%v) = %#x, want %#x", m, got, want)
			}
		}
	}
	zero := &net.Interface{Name: "eth9", HardwareAddr: make(net.HardwareAddr, 6)}
	if got, want := nodeGUID(zero), nodeGUID(&net.Interface{Name: "eth9"}); got != want {
		t.Errorf("nodeGUID of the zero MAC = %#x, want %#x, as with no MAC", got, want)
	}
}

// A netdev that is up with no IPv4 address is no device, and the error
// says so (not that some address is not on it).
func TestBindNetdevWithoutIPv4(t *testing.T) {
	if testenv.Device() != "" {
		// In the Soft-RoCE VM `ip link add dn0 type veth peer name dn1`
		// leaves no dn1 (SIOCGIFFLAGS: No such device); the host runs it.
		t.Skip("the VM's ip makes no named veth peer; run on the host")
	}
	if !testenv.InOwnNetns(t, "ip link add dn0 type veth peer name dn1", "ip link set dn1 up", "ip link set dn0 up") {
		return
	}
	// The veth's operational state turns up when linkwatch gets to it
	// (up to a second after its carrier); until then it is unusable.
	ifi, err := net.InterfaceByName("dn0")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := netlinkNetdev(ifi.Index)
		return err == nil && n.operState == "up"
	}, 10*time.Second, time.Millisecond, "dn0's operstate never turned up")
	id, err := Provider{}.Bind(verbs.BindConfig{Device: devicePrefix + "dn0"})
	if err == nil {
		id.Close()
	}
	require.ErrorIs(t, err, verbs.ErrNoDevice, "got Bind to dn0 %v, want no device", err)
	require.ErrorContains(t, err, "netdev dn0 has no IPv4 address", "got %v, want no IPv4 address named", err)
}

// igmp_max_memberships as the devices read it: its number, 0 for a
// negative one (no socket may join a group), and the kernel's default,
// 20, where the file holds no number (or nothing: it could not be read).
func TestParseMemberships(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"20\n", 20}, {"5\n", 5}, {"0\n", 0}, {"-3\n", 0},
		{"", 20}, {"junk\n", 20}, {"7 8\n", 20},
	} {
		if got := parseMemberships([]byte(c.in)); got != c.want {
			t.Errorf("parseMemberships(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}
