package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-rdma/rdmanet/ipoib"
	"github.com/go-rdma/rdmanet/rdmanet"
)

// backend is one way rdmanet can reach verbs, as printed.
type backend struct {
	name      string
	available bool
	detail    string
	// devices are the devices the backend itself reports
	// (rdmanet.Backends), on the live system only.
	devices []rdmanet.Device
}

// listBackends says which backends this machine offers. On the live system
// (live: no -root tree) it asks the library: rdmanet.Backends. Under a -root tree it can only read that tree: rdma-core is
// "available" when it has devices, and the software backend's devices,
// which come from the kernel's interface list, are not shown.
var listBackends = func(sys *ipoib.System, live bool) []backend {
	if live {
		return liveBackends()
	}
	var nds []string
	for _, n := range sys.Netdevs {
		nds = append(nds, n.Name)
	}
	sw := backend{name: rdmanet.BackendSoftware, available: true, detail: softDetail}
	if len(nds) > 0 {
		sw.detail += " (netdevs: " + strings.Join(nds, " ") + ")"
	}
	rc := backend{name: rdmanet.BackendRDMACore}
	ibdir := filepath.Join(sys.Root, "sys/class/infiniband")
	if n := len(sys.Devices); n > 0 {
		rc.available = true
		rc.detail = fmt.Sprintf("libibverbs + librdmacm; %d device(s) in %s", n, ibdir)
	} else {
		rc.detail = fmt.Sprintf("no devices in %s (for Soft-RoCE: rdma link add rxe0 type rxe netdev IFACE)", ibdir)
	}
	return []backend{sw, rc}
}

const softDetail = "pure-Go RoCE v2 over UDP; one device per netdev, lo by default"

// liveBackends asks the library which backends run here and what devices
// they see.
func liveBackends() []backend {
	var out []backend
	for _, bi := range rdmanet.Backends() {
		b := backend{name: bi.Name}
		if bi.Unavailable != nil {
			b.detail = bi.Unavailable.Error()
			out = append(out, b)
			continue
		}
		b.available = true
		b.devices = bi.Devices
		var names []string
		for _, d := range bi.Devices {
			names = append(names, d.Name)
		}
		switch bi.Name {
		case rdmanet.BackendSoftware:
			b.detail = softDetail
		case rdmanet.BackendRDMACore:
			b.detail = fmt.Sprintf("libibverbs + librdmacm; %d device(s): %s", len(bi.Devices), strings.Join(names, " "))
		default:
			b.detail = fmt.Sprintf("%d device(s): %s", len(bi.Devices), strings.Join(names, " "))
		}
		if bi.DevicesErr != nil {
			b.detail += "; listing devices: " + bi.DevicesErr.Error()
		}
		out = append(out, b)
	}
	return out
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
	live := filepath.Clean(*root) == "/"
	return printDevices(e.stdout, sys, listBackends(sys, live))
}

// refine applies what rdma-core's verbs know and sysfs does not to the
// devices ipoib found: max_mcast_grp 0 means no multicast, and the active
// MTU of a port whose MTU sysfs cannot derive (InfiniBand without a
// datagram-mode IPoIB interface) is ibv_query_port's.
func refine(sys *ipoib.System, backends []backend) (mcastWhy map[string]string, mtuFrom map[string]int) {
	mcastWhy, mtuFrom = map[string]string{}, map[string]int{}
	for _, b := range backends {
		if b.name != rdmanet.BackendRDMACore {
			continue
		}
		for _, vd := range b.devices {
			d := sys.Device(vd.Name)
			if d == nil {
				continue
			}
			if vd.MaxMcastGroups == 0 && d.Multicast {
				d.Multicast = false
				mcastWhy[d.Name] = "no (max_mcast_grp 0)"
			}
			for _, vp := range vd.Ports {
				if p := sys.Port(vd.Name, vp.Port); p != nil && p.ActiveMTU == 0 && vp.ActiveMTU > 0 {
					mtuFrom[fmt.Sprintf("%s/%d", vd.Name, vp.Port)] = vp.ActiveMTU
				}
			}
		}
	}
	return mcastWhy, mtuFrom
}

// printGIDs prints a GID table, aligned.
func printGIDs(out io.Writer, gids []ipoib.GIDEntry) error {
	gw := newTable(out)
	for _, g := range gids {
		nd := g.Netdev
		if nd == "" {
			nd = "-"
		}
		fmt.Fprintf(gw, "    GID[%d]\t%s\t%s\t%s\n", g.Index, g.GID, g.Type, nd)
	}
	return gw.Flush()
}

// printVerbsDevices prints devices a backend reports itself (the software
// backend's sw-<netdev>), in the style of the sysfs devices.
func printVerbsDevices(out io.Writer, b backend) error {
	for _, d := range b.devices {
		mc := fmt.Sprintf("yes (max %d groups)", d.MaxMcastGroups)
		if d.MaxMcastGroups == 0 {
			mc = "no"
		}
		fmt.Fprintf(out, "\n%s  backend %s  node_guid %s  multicast %s\n", d.Name, b.name, guid(d.NodeGUID), mc)
		for _, p := range d.Ports {
			mtu := "unknown"
			if p.ActiveMTU > 0 {
				mtu = strconv.Itoa(p.ActiveMTU)
				if p.Netdev != "" {
					mtu += " (from " + p.Netdev + ")"
				}
			}
			fmt.Fprintf(out, "  port %d  %s  link_layer %s  active_mtu %s\n", p.Port, p.State, p.LinkLayer, mtu)
			if p.Netdev != "" {
				fmt.Fprintf(out, "    netdevs %s\n", p.Netdev)
			}
			if err := printGIDs(out, p.GIDs); err != nil {
				return err
			}
		}
	}
	return nil
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

	mcastWhy, verbsMTU := refine(sys, backends)
	for _, d := range sys.Devices {
		mc := "yes"
		switch {
		case mcastWhy[d.Name] != "":
			mc = mcastWhy[d.Name]
		case !d.Multicast:
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
			} else if m := verbsMTU[fmt.Sprintf("%s/%d", d.Name, p.Port)]; m > 0 {
				mtu = fmt.Sprintf("%d (ibv_query_port)", m)
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
			if err := printGIDs(out, p.GIDs); err != nil {
				return err
			}
		}
	}
	for _, b := range backends {
		if b.name == rdmanet.BackendRDMACore {
			continue // its devices are the sysfs ones above
		}
		if err := printVerbsDevices(out, b); err != nil {
			return err
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
