//go:build linux

package soft

import (
	"testing"

	"golang.org/x/sys/unix"
)

// At most maxNetViews namespaces are kept, the least recently used one
// dropped first.
func TestNetViewsKeepAtMost(t *testing.T) {
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
	for i := range uint64(maxNetViews + 2) {
		view(base + i)
		if i == maxNetViews-1 {
			view(base) // the table is full; base is now the latest used
		}
	}
	netViews.mu.Lock()
	kept := map[uint64]bool{}
	for _, v := range netViews.views {
		kept[v.cookie-base] = true
	}
	netViews.mu.Unlock()
	if len(kept) != maxNetViews {
		t.Fatalf("%d namespaces kept, want %d: %v", len(kept), maxNetViews, kept)
	}
	// Views 0..5 made, 0 used again after 3: 1 was dropped first, then 2.
	for i := range uint64(maxNetViews + 2) {
		if want := i != 1 && i != 2; kept[i] != want {
			t.Errorf("namespace %d kept %v, want %v (kept: %v)", i, kept[i], want, kept)
		}
	}
}
