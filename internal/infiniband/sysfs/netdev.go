package sysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-rdma/rdmanet/internal/infiniband"
)

// LookupNetdev reads one network interface from the sysfs under root,
// without the RDMA side: Device and Port are left empty (Discover fills
// them). It fails when the interface does not exist.
func LookupNetdev(root, name string) (Netdev, error) {
	if root == "" {
		root = "/"
	}
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return Netdev{}, fmt.Errorf("ipoib: bad interface name %q", name)
	}
	dir := filepath.Join(root, "sys/class/net", name)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Netdev{}, fmt.Errorf("ipoib: no network interface %q", name)
	}
	return readNetdev(dir, name)
}

// ARPHRD values of /sys/class/net/X/type.
const (
	arphrdEther      = 1
	arphrdInfiniBand = 32
	arphrdLoopback   = 772
)

func readNetdevs(dir string) ([]Netdev, error) {
	names, err := listDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ipoib: %w", err)
	}
	var out []Netdev
	for _, name := range names {
		// Not every entry is an interface: bonding adds a
		// bonding_masters file.
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || !fi.IsDir() {
			continue
		}
		n, err := readNetdev(filepath.Join(dir, name), name)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func readNetdev(dir, name string) (Netdev, error) {
	n := Netdev{Name: name}
	num := func(file string) (int, error) {
		v, ok := readTrim(filepath.Join(dir, file))
		if !ok {
			return 0, nil
		}
		i, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("ipoib: %s/%s: want a number, have %q", dir, file, v)
		}
		return i, nil
	}
	var err error
	if n.Index, err = num("ifindex"); err != nil {
		return n, err
	}
	if n.MTU, err = num("mtu"); err != nil {
		return n, err
	}
	if n.ARPHRD, err = num("type"); err != nil {
		return n, err
	}
	switch n.ARPHRD {
	case arphrdEther:
		n.Kind = infiniband.NetdevEthernet
	case arphrdInfiniBand:
		n.Kind = infiniband.NetdevIPoIB
	case arphrdLoopback:
		n.Kind = infiniband.NetdevLoopback
	}
	n.OperState, _ = readTrim(filepath.Join(dir, "operstate"))
	if n.Kind != infiniband.NetdevIPoIB {
		return n, nil
	}
	for file, dst := range map[string]*infiniband.LinkAddr{"address": &n.LinkAddr, "broadcast": &n.Broadcast} {
		if v, ok := readTrim(filepath.Join(dir, file)); ok {
			if *dst, err = infiniband.ParseLinkAddr(v); err != nil {
				return n, fmt.Errorf("%s/%s: %w", dir, file, err)
			}
		}
	}
	if v, ok := readTrim(filepath.Join(dir, "pkey")); ok {
		k, err := strconv.ParseUint(v, 0, 16)
		if err != nil {
			return n, fmt.Errorf("ipoib: %s/pkey: bad P_Key %q", dir, v)
		}
		n.PKey = uint16(k)
	} else {
		n.PKey = n.Broadcast.MGID().PKey()
	}
	n.Parent, _ = readTrim(filepath.Join(dir, "parent"))
	n.Mode, _ = readTrim(filepath.Join(dir, "mode"))
	return n, nil
}
