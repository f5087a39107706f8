package sysfs

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-rdma/rdmanet/internal/infiniband"
)

func readDevices(dir string) ([]Device, error) {
	names, err := listDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ipoib: %w", err)
	}
	var out []Device
	for _, name := range names {
		d, err := readDevice(filepath.Join(dir, name), name)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func readDevice(dir, name string) (Device, error) {
	d := Device{Name: name, NodeType: infiniband.NodeCA}
	if v, ok := readTrim(filepath.Join(dir, "node_type")); ok {
		n, _, err := numberColonName(v)
		if err != nil {
			return d, fmt.Errorf("ipoib: %s/node_type: %v", dir, err)
		}
		d.NodeType = infiniband.NodeType(n)
	}
	if v, ok := readTrim(filepath.Join(dir, "node_guid")); ok {
		g, err := strconv.ParseUint(strings.ReplaceAll(v, ":", ""), 16, 64)
		if err != nil {
			return d, fmt.Errorf("ipoib: %s/node_guid: bad GUID %q", dir, v)
		}
		d.NodeGUID = g
	}
	d.Multicast = d.NodeType == infiniband.NodeCA
	ports, err := numbered(filepath.Join(dir, "ports"))
	if err != nil {
		return d, fmt.Errorf("ipoib: %w", err)
	}
	for _, pn := range ports {
		p, err := readPort(filepath.Join(dir, "ports", strconv.Itoa(pn)), name, pn, d.NodeType)
		if err != nil {
			return d, err
		}
		d.Ports = append(d.Ports, p)
	}
	return d, nil
}

// numberColonName parses "4: ACTIVE" (state, phys_state, node_type).
func numberColonName(v string) (int, string, error) {
	num, name, ok := strings.Cut(v, ":")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if !ok || err != nil || n < 0 || n > 255 {
		return 0, "", fmt.Errorf("want \"N: NAME\", have %q", v)
	}
	return n, strings.TrimSpace(name), nil
}

func readPort(dir, device string, num int, node infiniband.NodeType) (Port, error) {
	p := Port{Device: device, Port: num}
	if v, ok := readTrim(filepath.Join(dir, "state")); ok {
		n, _, err := numberColonName(v)
		if err != nil {
			return p, fmt.Errorf("ipoib: %s/state: %v", dir, err)
		}
		p.State = infiniband.PortState(n)
	}
	if v, ok := readTrim(filepath.Join(dir, "phys_state")); ok {
		if _, name, err := numberColonName(v); err == nil {
			p.PhysState = name
		}
	}
	if v, ok := readTrim(filepath.Join(dir, "link_layer")); ok {
		switch v {
		case "InfiniBand":
			p.LinkLayer = infiniband.LinkLayerInfiniBand
		case "Ethernet":
			p.LinkLayer = infiniband.LinkLayerEthernet
		}
	}
	idx, err := numbered(filepath.Join(dir, "gids"))
	if err != nil {
		return p, fmt.Errorf("ipoib: %w", err)
	}
	for _, i := range idx {
		e, ok, err := readGIDEntry(dir, i, p.LinkLayer, node)
		if err != nil {
			return p, err
		}
		if ok {
			p.GIDs = append(p.GIDs, e)
		}
	}
	idx, err = numbered(filepath.Join(dir, "pkeys"))
	if err != nil {
		return p, fmt.Errorf("ipoib: %w", err)
	}
	for _, i := range idx {
		v, ok := readTrim(filepath.Join(dir, "pkeys", strconv.Itoa(i)))
		if !ok {
			continue
		}
		k, err := strconv.ParseUint(v, 0, 16)
		if err != nil {
			return p, fmt.Errorf("ipoib: %s/pkeys/%d: bad P_Key %q", dir, i, v)
		}
		if k != 0 {
			p.PKeys = append(p.PKeys, uint16(k))
		}
	}
	return p, nil
}

// readGIDEntry reads entry i of the GID table of the port directory dir.
// ok is false for an unused (zero or unreadable) entry.
func readGIDEntry(dir string, i int, ll infiniband.LinkLayer, node infiniband.NodeType) (e infiniband.GIDEntry, ok bool, err error) {
	si := strconv.Itoa(i)
	v, ok := readTrim(filepath.Join(dir, "gids", si))
	if !ok {
		return e, false, nil
	}
	g, err := infiniband.ParseGID(v)
	if err != nil {
		return e, false, fmt.Errorf("ipoib: %s/gids/%d: %v", dir, i, err)
	}
	if g.IsZero() {
		return e, false, nil // an unused entry
	}
	e = infiniband.GIDEntry{Index: i, GID: g}
	t, typed := readTrim(filepath.Join(dir, "gid_attrs", "types", si))
	switch {
	case !typed && node != infiniband.NodeCA:
		e.Type = infiniband.GIDTypeUnknown
	case t == "RoCE v2":
		e.Type = infiniband.GIDTypeRoCEv2
	case ll == infiniband.LinkLayerEthernet:
		e.Type = infiniband.GIDTypeRoCEv1 // "IB/RoCE v1" on an Ethernet port
	default:
		e.Type = infiniband.GIDTypeIB
	}
	e.Netdev, _ = readTrim(filepath.Join(dir, "gid_attrs", "ndevs", si))
	return e, true, nil
}

// LookupGID finds gid in the GID table of a device's port under root,
// reading the table only as far as it must: on an Ethernet port the first
// RoCE v2 entry with that GID, else the first entry of any type; on
// InfiniBand the first. GID tables have hundreds of slots, mostly empty
// (rxe has 1024), and each is a file: Discover reads them all, which costs
// a slow machine a second or more, while the entry a bound address uses
// is usually among the first. ok is false when the table has no such
// GID; an error means the port's directory could not be read.
func LookupGID(root, device string, port int, gid infiniband.GID) (e infiniband.GIDEntry, ok bool, err error) {
	if root == "" {
		root = "/"
	}
	ddir := filepath.Join(root, "sys/class/infiniband", device)
	node := infiniband.NodeCA
	if v, found := readTrim(filepath.Join(ddir, "node_type")); found {
		if n, _, err := numberColonName(v); err == nil {
			node = infiniband.NodeType(n)
		}
	}
	dir := filepath.Join(ddir, "ports", strconv.Itoa(port))
	var ll infiniband.LinkLayer
	switch v, _ := readTrim(filepath.Join(dir, "link_layer")); v {
	case "InfiniBand":
		ll = infiniband.LinkLayerInfiniBand
	case "Ethernet":
		ll = infiniband.LinkLayerEthernet
	}
	idx, err := numbered(filepath.Join(dir, "gids"))
	if err != nil {
		return e, false, fmt.Errorf("ipoib: %w", err)
	}
	if idx == nil {
		return e, false, fmt.Errorf("ipoib: %s port %d: no infiniband.GID table in %s", device, port, dir)
	}
	for _, i := range idx {
		ent, valid, err := readGIDEntry(dir, i, ll, node)
		if err != nil {
			return e, false, err
		}
		if !valid || ent.GID != gid {
			continue
		}
		if !ok {
			e, ok = ent, true
		}
		if ll != infiniband.LinkLayerEthernet || ent.Type == infiniband.GIDTypeRoCEv2 {
			return ent, true, nil
		}
	}
	return e, ok, nil
}
