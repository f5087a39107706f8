package verbs

import (
	"fmt"
	"sort"
	"sync"
)

// Provider names.
const (
	Software = "software"
	RDMACore = "rdma-core"
)

var (
	providersMu sync.Mutex
	providers   = map[string]Provider{}
)

// Register makes a provider available by name. Providers call it from init.
func Register(p Provider) {
	providersMu.Lock()
	defer providersMu.Unlock()
	providers[p.Name()] = p
}

// Lookup returns the provider registered under name.
func Lookup(name string) (Provider, error) {
	providersMu.Lock()
	defer providersMu.Unlock()
	p, ok := providers[name]
	if !ok {
		return nil, fmt.Errorf("verbs: no provider %q (%w)", name, ErrUnavailable)
	}
	return p, nil
}

// Providers returns every registered provider, sorted by name.
func Providers() []Provider {
	providersMu.Lock()
	defer providersMu.Unlock()
	ps := make([]Provider, 0, len(providers))
	for _, p := range providers {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name() < ps[j].Name() })
	return ps
}
