package main

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/go-rdma/rdmanet/ipoib"
)

func runMGID(e *env, args []string) error {
	const argsUsage = "[-pkey P_KEY] [-scope SCOPE] GROUP|MGID"
	fs := newFlagSet(e, "mgid", argsUsage)
	pkeyArg := fs.String("pkey", "0xffff", "InfiniBand partition key, hex (the full-member bit is set as IPoIB does)")
	scopeArg := fs.String("scope", "2", "IPoIB scope nibble: 0-15, or link, site, org, global")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("no group given")
	case len(pos) > 1:
		return usagef("one group at a time, have %q", pos)
	}
	pkey, err := parsePKey(*pkeyArg)
	if err != nil {
		return err
	}
	scope, err := parseScope(*scopeArg)
	if err != nil {
		return err
	}
	in := pos[0]
	addr, err := netip.ParseAddr(in)
	if err != nil || addr.Zone() != "" {
		return usagef("bad group %q: want an IPv4 or IPv6 multicast address (239.1.2.3, ff02::1) or an MGID in colon-hex form (ff12:401b:ffff::f01:203)", in)
	}

	var origins []ipoib.Origin
	if addr.Is6() {
		m := ipoib.MGID(addr.As16())
		for _, o := range m.Origins() {
			if o.Mapping == ipoib.MapRoCEIPv6 && !addr.Is4In6() {
				continue // the group itself, shown by the forward mapping
			}
			origins = append(origins, o)
		}
	}
	forward := !addr.Is4In6() && addr.IsMulticast()
	if !forward && len(origins) == 0 {
		if addr.Is4() {
			return usagef("%s is not a multicast group (224.0.0.0/4)", addr)
		}
		return usagef("%s is neither a multicast group nor an MGID that any mapping here produces", addr)
	}
	// An MGID that some mapping produces is most likely meant as one:
	// its origins come first, then what it maps to read as an IPv6 group.
	if len(origins) > 0 {
		if err := printOrigins(e.stdout, addr, origins); err != nil {
			return err
		}
		if forward {
			fmt.Fprintf(e.stdout, "\nread as an IPv6 group:\n")
		}
	}
	if forward {
		return printForward(e.stdout, addr, pkey, scope)
	}
	return nil
}

func printForward(out io.Writer, group netip.Addr, pkey uint16, scope ipoib.Scope) error {
	ib, err := ipoib.IPoIBMGID(group, pkey, scope)
	if err != nil {
		return err
	}
	cm, err := ipoib.RDMACMMGID(group, pkey, scope)
	if err != nil {
		return err
	}
	v2, err := ipoib.RoCEv2MGID(group)
	if err != nil {
		return err
	}
	v1, err := ipoib.RoCEv1MGID(group)
	if err != nil {
		return err
	}
	mac, err := ipoib.EthernetMAC(group)
	if err != nil {
		return err
	}
	bc, err := ipoib.BroadcastMGID(pkey, scope)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "group %s  P_Key %#04x  scope %v\n", group, pkey|ipoib.FullMember, scope)
	if pkey&ipoib.FullMember == 0 {
		fmt.Fprintf(out, "(P_Key %#04x given: IPoIB and rdma_cm set the full-member bit)\n", pkey)
	}
	w := newTable(out)
	ibNote, cmNote, v2Note := "", "", ""
	if group.Is6() {
		ibNote = "only the group's low 80 bits"
		cmNote = ibNote
		v2Note = "rdma_cm refuses IPv6 joins on RoCE v2 (ENOTSUPP)"
		if cm == ipoib.MGID(group.As16()) {
			cmNote = "an SA-assigned MGID, used verbatim"
		}
	}
	fmt.Fprintf(w, "IPoIB (RFC 4391)\t%s\t%s\n", ib, ibNote)
	fmt.Fprintf(w, "rdma_cm UDP on InfiniBand\t%s\t%s\n", cm, cmNote)
	fmt.Fprintf(w, "rdma_cm on RoCE v2\t%s\t%s\n", v2, v2Note)
	fmt.Fprintf(w, "rdma_cm on RoCE v1\t%s\t\n", v1)
	fmt.Fprintf(w, "Ethernet MAC (RoCE)\t%s\t\n", mac)
	fmt.Fprintf(w, "IPoIB broadcast group\t%s\t\n", bc)
	return w.Flush()
}

func printOrigins(out io.Writer, addr netip.Addr, origins []ipoib.Origin) error {
	fmt.Fprintf(out, "MGID %s comes from\n", addr)
	w := newTable(out)
	for _, o := range origins {
		group := o.Group.String()
		note := ""
		switch {
		case o.Mapping == ipoib.MapBroadcast:
			group = "the broadcast group"
		case o.Partial:
			note = "low 80 bits only: the group's first 48 bits are not in the MGID"
		case o.Mapping == ipoib.MapRDMACMSA || o.Mapping == ipoib.MapRoCEIPv6:
			note = "verbatim"
		}
		ib := ""
		switch o.Mapping {
		case ipoib.MapIPoIB, ipoib.MapRDMACM, ipoib.MapBroadcast:
			ib = fmt.Sprintf("P_Key %#04x  scope %v", o.PKey, o.Scope)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", o.Mapping, group, ib, note)
	}
	return w.Flush()
}

func parsePKey(s string) (uint16, error) {
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(s), "0x"), 16, 16)
	if err != nil {
		return 0, usagef("bad -pkey %q: want a 16-bit hex P_Key such as 0xffff or 8001", s)
	}
	if v&0x7fff == 0 {
		return 0, usagef("bad -pkey %q: %#04x is not a valid partition key", s, v)
	}
	return uint16(v), nil
}

func parseScope(s string) (ipoib.Scope, error) {
	switch strings.ToLower(s) {
	case "link", "link-local":
		return ipoib.ScopeLinkLocal, nil
	case "site", "site-local":
		return ipoib.ScopeSiteLocal, nil
	case "org", "organization", "organization-local":
		return ipoib.ScopeOrgLocal, nil
	case "global":
		return ipoib.ScopeGlobal, nil
	}
	v, err := strconv.ParseUint(s, 0, 8)
	if err != nil || v > 15 {
		return 0, usagef("bad -scope %q: want 0-15 (2 link-local, 5 site-local, 8 organization-local, 14 global) or a name", s)
	}
	return ipoib.Scope(v), nil
}
