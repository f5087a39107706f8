//go:build linux

package soft

import (
	"errors"
	"net"
	"os/exec"
	"testing"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Bind reads the kept view of the namespace's links and addresses, and a
// change rtnetlink reports is seen by the next Bind: an address added to
// lo can be bound at once, and once deleted it cannot.
func TestNetViewSeesChanges(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) != 1 || ifs[0].Name != "lo" {
		t.Skip("changes lo's addresses: needs a private network namespace (unshare -n sh -c 'ip link set lo up && go test ...')")
	}
	const addr = "10.201.7.9"
	bind := func() error {
		id, err := Provider{}.Bind(verbs.BindConfig{Addr: net.ParseIP(addr)})
		if err == nil {
			id.Close()
		}
		return err
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Skipf("ip %v: %v: %s", args, err, out)
		}
	}
	if err := bind(); !errors.Is(err, verbs.ErrNoDevice) {
		t.Fatalf("Bind to %s before it exists: %v, want ErrNoDevice", addr, err)
	}
	ip("addr", "add", addr+"/32", "dev", "lo")
	defer exec.Command("ip", "addr", "del", addr+"/32", "dev", "lo").Run()
	if err := bind(); err != nil {
		t.Fatalf("Bind to %s just added to lo: %v", addr, err)
	}
	ip("addr", "del", addr+"/32", "dev", "lo")
	if err := bind(); !errors.Is(err, verbs.ErrNoDevice) {
		t.Fatalf("Bind to %s just deleted: %v, want ErrNoDevice", addr, err)
	}
}
