//go:build linux

package soft

import (
	"errors"
	"net"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

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

// At most 4 namespaces are kept (the package doc's), the least recently
// used one dropped first.
func TestNetViewsKeepAtMost(t *testing.T) {
	const most = 4 // written out, not maxNetViews: the test pins it
	netViews.mu.Lock()
	saved := netViews.views
	netViews.views = nil // this test's own table
	netViews.mu.Unlock()
	t.Cleanup(func() {
		netViews.mu.Lock()
		for _, v := range netViews.views {
			unix.Close(v.sub)
		}
		netViews.views = saved
		netViews.mu.Unlock()
	})
	const base = 1 << 63 // no namespace has such a cookie
	view := func(c uint64) {
		t.Helper()
		if _, err := currentNetlinkView(c); err != nil {
			t.Fatalf("currentNetlinkView: %v", err)
		}
	}
	for i := range uint64(most + 2) {
		view(base + i)
		if i == most-1 {
			view(base) // the table is full; base is now the latest used
		}
	}
	netViews.mu.Lock()
	kept := map[uint64]bool{}
	for _, v := range netViews.views {
		kept[v.cookie-base] = true
	}
	netViews.mu.Unlock()
	if len(kept) != most {
		t.Fatalf("%d namespaces kept, want %d: %v", len(kept), most, kept)
	}
	// Views 0..5 made, 0 used again after 3: 1 was dropped first, then 2.
	for i := range uint64(most + 2) {
		if want := i != 1 && i != 2; kept[i] != want {
			t.Errorf("namespace %d kept %v, want %v (kept: %v)", i, kept[i], want, kept)
		}
	}
}
