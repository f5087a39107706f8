package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/go-rdma/rdmanet/ipoib"
)

// backend is one way rdmanet can reach verbs.
type backend struct {
	name      string
	available bool
	detail    string
}

// listBackends says which backends this machine offers. It reads only
// sysfs; when the rdmanet library grows a backend registry, swap this
// function for one that asks it.
var listBackends = func(sys *ipoib.System) []backend {
	var nds []string
	for _, n := range sys.Netdevs {
		nds = append(nds, n.Name)
	}
	sw := backend{name: "software", available: true,
		detail: "pure-Go RoCE v2 over UDP; one device per netdev, lo by default"}
	if len(nds) > 0 {
		sw.detail += " (netdevs: " + strings.Join(nds, " ") + ")"
	}
	rc := backend{name: "rdma-core"}
	ibdir := filepath.Join(sys.Root, "sys/class/infiniband")
	if n := len(sys.Devices); n > 0 {
		rc.available = true
		rc.detail = fmt.Sprintf("libibverbs + librdmacm; %d device(s) in %s", n, ibdir)
	} else {
		rc.detail = fmt.Sprintf("no devices in %s (for Soft-RoCE: rdma link add rxe0 type rxe netdev IFACE)", ibdir)
	}
	return []backend{sw, rc}
}

func runDevices(e *env, args []string) error {
	const argsUsage = "[-root DIR]"
	fs := newFlagSet(e, "devices", argsUsage)
	root := fs.String("root", e.root, "sysfs root: the directory holding sys/class (for tests and captured trees)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	sys, err := ipoib.Discover(*root)
	if err != nil {
		return err
	}
	return printDevices(e.stdout, sys, listBackends(sys))
}

func printDevices(out io.Writer, sys *ipoib.System, backends []backend) error {
	w := newTable(out)
	fmt.Fprintln(w, "BACKEND\tSTATUS\tDETAIL")
	for _, b := range backends {
		status := "unavailable"
		if b.available {
			status = "available"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", b.name, status, b.detail)
	}
	if err := w.Flush(); err != nil {
		return err
	}

	for _, d := range sys.Devices {
		mc := "yes"
		if !d.Multicast {
			mc = "no (" + d.NodeType.String() + " transport)"
		}
		fmt.Fprintf(out, "\n%s  node_type %s  node_guid %s  multicast %s\n",
			d.Name, d.NodeType, guid(d.NodeGUID), mc)
		for _, p := range d.Ports {
			state := p.State.String()
			if p.PhysState != "" {
				state += " (" + p.PhysState + ")"
			}
			mtu := "unknown"
			if p.ActiveMTU > 0 {
				mtu = fmt.Sprintf("%d (from %s)", p.ActiveMTU, p.MTUFrom)
			}
			fmt.Fprintf(out, "  port %d  %s  link_layer %s  active_mtu %s\n", p.Port, state, p.LinkLayer, mtu)
			if len(p.Netdevs) > 0 {
				fmt.Fprintf(out, "    netdevs %s\n", strings.Join(p.Netdevs, " "))
			}
			if len(p.PKeys) > 0 {
				var ks []string
				for _, k := range p.PKeys {
					ks = append(ks, fmt.Sprintf("%#04x", k))
				}
				fmt.Fprintf(out, "    pkeys %s\n", strings.Join(ks, " "))
			}
			gw := newTable(out)
			for _, g := range p.GIDs {
				nd := g.Netdev
				if nd == "" {
					nd = "-"
				}
				fmt.Fprintf(gw, "    GID[%d]\t%s\t%s\t%s\n", g.Index, g.GID, g.Type, nd)
			}
			if err := gw.Flush(); err != nil {
				return err
			}
		}
	}

	fmt.Fprintln(out)
	w = newTable(out)
	fmt.Fprintln(w, "NETDEV\tKIND\tMTU\tSTATE\tRDMA\tP_KEY")
	for _, n := range sys.Netdevs {
		rdma, pkey := "-", "-"
		if n.Device != "" {
			rdma = fmt.Sprintf("%s/%d", n.Device, n.Port)
		}
		if n.Kind == ipoib.NetdevIPoIB {
			pkey = fmt.Sprintf("%#04x", n.PKey)
			if n.Parent != "" {
				pkey += " (child of " + n.Parent + ")"
			}
		}
		state := n.OperState
		if state == "" {
			state = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", n.Name, n.Kind, n.MTU, state, rdma, pkey)
	}
	return w.Flush()
}

func guid(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}
