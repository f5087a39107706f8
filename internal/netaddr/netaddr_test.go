package netaddr

import (
	"net"
	"testing"
)

type addr struct{}

func (*addr) Network() string { return "test" }
func (*addr) String() string  { return "test" }

type other struct{}

func (*other) Network() string { return "other" }
func (*other) String() string  { return "other" }

func TestIsNil(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr net.Addr
		want bool
	}{
		{"nil", nil, true},
		{"nil *net.UDPAddr", (*net.UDPAddr)(nil), true},
		{"nil *net.IPAddr", (*net.IPAddr)(nil), true},
		{"nil *A", (*addr)(nil), true},
		{"nil pointer of another type", (*other)(nil), false},
		{"*net.UDPAddr", &net.UDPAddr{}, false},
		{"*net.IPAddr", &net.IPAddr{}, false},
		{"*A", &addr{}, false},
	} {
		if got := IsNil[*addr](tc.addr); got != tc.want {
			t.Errorf("IsNil(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
