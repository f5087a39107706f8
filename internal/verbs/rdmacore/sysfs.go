package rdmacore

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// sysfsRoot is where the kernel lists RDMA devices; tests point it at a
// fake tree.
var sysfsRoot = "/sys/class/infiniband"

// readGIDTable reads a port's GID table from sysfs
// (ports/<p>/gids/<i>, gid_attrs/types/<i>, gid_attrs/ndevs/<i>), skipping
// zero GIDs. On InfiniBand every entry is of type IB; on Ethernet the type
// file says "IB/RoCE v1" or "RoCE v2".
func readGIDTable(dev string, port int, ll verbs.LinkLayer) ([]verbs.GIDEntry, error) {
	var out []verbs.GIDEntry
	err := scanGIDs(dev, port, ll, func(e verbs.GIDEntry) bool {
		out = append(out, e)
		return true
	})
	return out, err
}

// findGID looks gid up in a port's GID table, reading only as far as it
// must: the first RoCE v2 (or, on InfiniBand, the first) entry with that
// GID, else the first entry of any type. Tables have hundreds of slots,
// mostly empty; reading them all costs a bind hundreds of milliseconds on
// a slow machine.
func findGID(dev string, port int, ll verbs.LinkLayer, gid verbs.GID) (verbs.GIDEntry, bool, error) {
	var found verbs.GIDEntry
	ok := false
	err := scanGIDs(dev, port, ll, func(e verbs.GIDEntry) bool {
		if e.GID != gid {
			return true
		}
		if !ok {
			found, ok = e, true
		}
		if ll == verbs.LinkLayerInfiniBand || e.Type == verbs.GIDTypeRoCEv2 {
			found = e
			return false
		}
		return true
	})
	return found, ok, err
}

// scanGIDs calls f for each non-zero entry, in index order, until f
// returns false.
func scanGIDs(dev string, port int, ll verbs.LinkLayer, f func(verbs.GIDEntry) bool) error {
	dir := filepath.Join(sysfsRoot, dev, "ports", strconv.Itoa(port))
	ents, err := os.ReadDir(filepath.Join(dir, "gids"))
	if err != nil {
		return fmt.Errorf("rdmacore: GID table of %s port %d: %w", dev, port, err)
	}
	idx := make([]int, 0, len(ents))
	for _, e := range ents {
		if i, err := strconv.Atoi(e.Name()); err == nil {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	for _, i := range idx {
		name := strconv.Itoa(i)
		b, err := os.ReadFile(filepath.Join(dir, "gids", name))
		if err != nil {
			// Reading an unused entry fails with EINVAL on some kernels.
			continue
		}
		g, err := verbs.ParseGID(strings.TrimSpace(string(b)))
		if err != nil || g.IsZero() {
			continue
		}
		ent := verbs.GIDEntry{Index: i, GID: g, Type: verbs.GIDTypeIB}
		if ll != verbs.LinkLayerInfiniBand {
			t, _ := os.ReadFile(filepath.Join(dir, "gid_attrs", "types", name))
			ent.Type = parseGIDType(string(t))
		}
		if nd, err := os.ReadFile(filepath.Join(dir, "gid_attrs", "ndevs", name)); err == nil {
			ent.Netdev = strings.TrimSpace(string(nd))
		}
		if !f(ent) {
			return nil
		}
	}
	return nil
}

func parseGIDType(s string) verbs.GIDType {
	s = strings.TrimSpace(s)
	switch {
	case strings.Contains(s, "v2"):
		return verbs.GIDTypeRoCEv2
	case strings.Contains(s, "RoCE"):
		return verbs.GIDTypeRoCEv1
	}
	return verbs.GIDTypeIB
}

// portNetdev is the netdev under a port: the one of its first GID entry
// that names one.
func portNetdev(table []verbs.GIDEntry) string {
	for _, e := range table {
		if e.Netdev != "" {
			return e.Netdev
		}
	}
	return ""
}

// netdevOf names the interface that has ip, or "".
func netdevOf(ip net.IP) string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return ifc.Name
			}
		}
	}
	return ""
}

// localAddr chooses the address to bind as verbs.BindConfig says: Addr, or
// the first address of Interface (IPv4 unless cfg.IPv6; a global IPv6
// address before a link-local one), or loopback. Never the default
// route's interface. zone is the interface index for a link-local IPv6
// address, else 0.
func localAddr(cfg verbs.BindConfig) (ip net.IP, zone uint32, err error) {
	if cfg.Addr != nil {
		ip = cfg.Addr
		if ip.To4() == nil && ip.IsLinkLocalUnicast() && cfg.Interface != nil {
			zone = uint32(cfg.Interface.Index)
		}
		return ip, zone, nil
	}
	if cfg.Interface != nil {
		addrs, err := cfg.Interface.Addrs()
		if err != nil {
			return nil, 0, fmt.Errorf("rdmacore: addresses of %s: %w", cfg.Interface.Name, err)
		}
		var linkLocal net.IP
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			is4 := n.IP.To4() != nil
			if is4 == cfg.IPv6 {
				continue
			}
			if !is4 && n.IP.IsLinkLocalUnicast() {
				if linkLocal == nil {
					linkLocal = n.IP
				}
				continue
			}
			return n.IP, 0, nil
		}
		if linkLocal != nil {
			return linkLocal, uint32(cfg.Interface.Index), nil
		}
		fam := "IPv4"
		if cfg.IPv6 {
			fam = "IPv6"
		}
		return nil, 0, fmt.Errorf("rdmacore: interface %s has no %s address: %w", cfg.Interface.Name, fam, verbs.ErrNoDevice)
	}
	if cfg.IPv6 {
		return net.IPv6loopback, 0, nil
	}
	return net.IPv4(127, 0, 0, 1).To4(), 0, nil
}

// sockaddr is a struct sockaddr_storage built in Go (8-byte aligned).
type sockaddr struct {
	_ [0]uint64
	b [128]byte
}

const (
	afInet  = 2
	afInet6 = 10
	afIB    = 27
)

// sockaddrIP fills a sockaddr_in or sockaddr_in6 (port 0).
func sockaddrIP(ip net.IP, zone uint32) sockaddr {
	var sa sockaddr
	if v4 := ip.To4(); v4 != nil {
		binary.NativeEndian.PutUint16(sa.b[0:], afInet)
		copy(sa.b[4:8], v4)
		return sa
	}
	binary.NativeEndian.PutUint16(sa.b[0:], afInet6)
	copy(sa.b[8:24], ip.To16())
	binary.NativeEndian.PutUint32(sa.b[24:], zone)
	return sa
}

// sockaddrIB fills a sockaddr_ib carrying a raw MGID, as mckey -M does.
func sockaddrIB(mgid verbs.GID) sockaddr {
	var sa sockaddr
	binary.NativeEndian.PutUint16(sa.b[0:], afIB)
	copy(sa.b[8:24], mgid[:])
	return sa
}

// groupSockaddr is the address rdma_join_multicast gets for a group: the
// IP group as sockaddr_in/in6; a raw MGID as sockaddr_in when it is an
// IPv4-mapped one (RoCE v2 can only join those), as sockaddr_ib on
// InfiniBand (mckey -M), else as sockaddr_in6.
func groupSockaddr(g verbs.Group, ll verbs.LinkLayer) (sockaddr, error) {
	if !g.MGID.IsZero() {
		if a := g.MGID.Addr(); a.Is4() {
			return sockaddrIP(net.IP(a.AsSlice()), 0), nil
		}
		if ll == verbs.LinkLayerInfiniBand {
			return sockaddrIB(g.MGID), nil
		}
		return sockaddrIP(net.IP(g.MGID[:]), 0), nil
	}
	if g.IP == nil || !g.IP.IsMulticast() {
		return sockaddr{}, fmt.Errorf("rdmacore: %v is not a multicast group address", g.IP)
	}
	return sockaddrIP(g.IP, 0), nil
}

// groupIsIPv6 reports whether a join would use an IPv6 address (not
// supported by rdma_cm on RoCE v2).
func groupIsIPv6(g verbs.Group) bool {
	if !g.MGID.IsZero() {
		return !g.MGID.Addr().Is4()
	}
	return g.IP.To4() == nil
}
