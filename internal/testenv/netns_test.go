package testenv

import (
	"net"
	"os"
	"testing"
)

// The child runs in a namespace of its own: lo is up, the setup ran there
// (the veth pair exists), and nothing else is there; the parent's
// namespace never sees the link.
func TestInOwnNetns(t *testing.T) {
	if !InOwnNetns(t, "ip link add rdmanettest0 type veth peer name rdmanettest1") {
		if _, err := net.InterfaceByName("rdmanettest0"); err == nil {
			t.Error("the setup's link is in the parent's namespace")
		}
		return
	}
	if got := os.Getenv(EnvNetns); got != t.Name() {
		t.Errorf("%s = %q, want %q", EnvNetns, got, t.Name())
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ifi := range ifs {
		names = append(names, ifi.Name)
		if ifi.Name == "lo" && ifi.Flags&net.FlagUp == 0 {
			t.Error("lo is down")
		}
	}
	if len(names) != 3 {
		t.Errorf("interfaces %v, want lo and the veth pair rdmanettest0, rdmanettest1", names)
	}
	if _, err := net.InterfaceByName("rdmanettest0"); err != nil {
		t.Errorf("the setup's link: %v", err)
	}
}
