package verbs

import "fmt"

// NeedsLinux is the error of a provider in a build for another GOOS
// (every provider's stub off Linux, as golang.org/x/net/ipv4's
// sys_stub.go): it says that rdmanet needs Linux and what for, names goos
// (runtime.GOOS at the caller) and wraps ErrUnavailable. It has no build
// tag, so its text is tested on Linux too.
func NeedsLinux(goos, what string) error {
	return fmt.Errorf("rdmanet needs Linux: %s (GOOS=%s): %w", what, goos, ErrUnavailable)
}

// Stub is a provider that cannot run in this build: it registers under
// Name and answers every call with Err (which wraps ErrUnavailable).
type Stub struct {
	ProviderName string
	Err          error
}

var _ Provider = Stub{}

// Name returns s.ProviderName.
func (s Stub) Name() string { return s.ProviderName }

// Available returns s.Err.
func (s Stub) Available() error { return s.Err }

// Devices returns s.Err.
func (s Stub) Devices() ([]DeviceAttr, error) { return nil, s.Err }

// Serves is false: a stub serves nothing.
func (Stub) Serves(BindConfig) bool { return false }

// Bind returns s.Err.
func (s Stub) Bind(BindConfig) (ID, error) { return nil, s.Err }
