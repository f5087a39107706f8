package verbs

import (
	"errors"
	"testing"
)

// What a provider's stub says off Linux (soft/provider_other.go,
// rdmacore/provider_other.go, ipoib/sys_other.go): checked here, on Linux,
// through the helper that has no build tag.
func TestNeedsLinux(t *testing.T) {
	err := NeedsLinux("darwin", "the software backend (RoCE v2 over UDP) uses epoll, recvmmsg and netlink")
	want := "rdmanet needs Linux: the software backend (RoCE v2 over UDP) uses epoll, recvmmsg and netlink (GOOS=darwin): verbs: provider unavailable"
	if got := err.Error(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("got %v, want it to wrap ErrUnavailable", err)
	}
}

// A stub provider answers every call with its error and serves nothing.
func TestStubProvider(t *testing.T) {
	e := NeedsLinux("windows", "test")
	var p Provider = Stub{ProviderName: Software, Err: e}
	if got := p.Name(); got != Software {
		t.Errorf("Name: got %q, want %q", got, Software)
	}
	if err := p.Available(); err != e {
		t.Errorf("Available: got %v, want %v", err, e)
	}
	if devs, err := p.Devices(); devs != nil || err != e {
		t.Errorf("Devices: got %v, %v, want nil, %v", devs, err, e)
	}
	if p.Serves(BindConfig{}) {
		t.Error("Serves: got true, want false")
	}
	if id, err := p.Bind(BindConfig{}); id != nil || err != e {
		t.Errorf("Bind: got %v, %v, want nil, %v", id, err, e)
	}
}
