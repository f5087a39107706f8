// Command chat is a terminal chat over RDMA UD multicast, the first thing
// to run with rdmanet: in two terminals,
//
//	go run ./examples/chat -nick alice
//	go run ./examples/chat -nick bob
//
// On a machine without RDMA hardware it uses the software backend on
// loopback; over an RDMA fabric, -bind (or -iface) picks the port. It shows
// what UD multicast means: every line is one datagram, losses and
// duplicates are reported, not hidden. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"os/user"
	"strings"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// defaultGroup is administratively scoped (RFC 2365): it stays inside the
// site, whatever the fabric.
const defaultGroup = "239.255.77.1"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// hidden flags are for tests and demos of loss; -help does not list them.
var hidden = map[string]bool{"heartbeat": true, "drop-every": true}

// run is the whole program, callable from tests; it returns the exit
// status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		nick      = fs.String("nick", defaultNick(), "your name in the chat (at most 32 bytes, no spaces)")
		group     = fs.String("group", defaultGroup, "the multicast group to chat in")
		iface     = fs.String("iface", "", "the network interface whose RDMA port to use (default: loopback)")
		bind      = fs.String("bind", "", "the local IP address whose RDMA port to use (instead of -iface)")
		backend   = fs.String("backend", rdmanet.BackendAuto, "auto, software or rdma-core (RDMANET_BACKEND overrides)")
		loopback  = fs.Bool("loopback", false, "receive your own messages back through the group")
		heartbeat = fs.Duration("heartbeat", defaultInterval, "how often to announce presence")
		dropEvery = fs.Int("drop-every", 0, "testing: do not send every Nth message, as if the network lost it")
		reliab    = fs.Bool("reliable", false, "reliable multicast (rdmanet/reliable): lines arrive once and in order, lost ones are repaired")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: chat [flags]\n\nA chat over RDMA UD multicast. Commands: /who, /stats, /help, /quit.\n\nFlags:\n")
		fs.VisitAll(func(f *flag.Flag) {
			if hidden[f.Name] {
				return
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "false" {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
			fmt.Fprintf(stderr, "  -%s\n    \t%s%s\n", f.Name, f.Usage, def)
		})
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "chat: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return 2
	}
	opt, err := options(*nick, *group, *iface, *bind, *backend, *loopback)
	if err != nil {
		fmt.Fprintln(stderr, "chat:", err)
		return 2
	}
	opt.Heartbeat, opt.DropEvery, opt.Reliable = *heartbeat, *dropEvery, *reliab

	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()
	disp, err := NewDisplay(stdin, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "chat:", err)
		return 1
	}
	defer disp.Close()
	c, err := Open(ctx, opt, disp)
	if err != nil {
		disp.Close()
		fmt.Fprintln(stderr, "chat:", err)
		if opt.Iface == nil && opt.Listen.LocalAddr == nil {
			fmt.Fprintln(stderr, "chat: (on loopback; -bind ADDR or -iface NAME picks an RDMA port)")
		}
		return 1
	}
	if err := c.Run(ctx); err != nil {
		disp.Close()
		fmt.Fprintln(stderr, "chat:", err)
		return 1
	}
	return 0
}

// options checks the flags and turns them into Options.
func options(nick, group, iface, bind, backend string, loopback bool) (Options, error) {
	var opt Options
	if err := ValidNick(nick); err != nil {
		return opt, fmt.Errorf("-nick: %w", err)
	}
	opt.Nick = nick
	ip := net.ParseIP(group)
	if ip == nil || !ip.IsMulticast() {
		return opt, fmt.Errorf("-group %q: want a multicast IP address such as %s", group, defaultGroup)
	}
	opt.Group = &net.UDPAddr{IP: ip}
	switch {
	case iface != "" && bind != "":
		return opt, errors.New("-iface and -bind both choose the port: give one")
	case iface != "":
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return opt, fmt.Errorf("-iface: %w", err)
		}
		opt.Iface = ifi
	case bind != "":
		a := net.ParseIP(bind)
		if a == nil {
			return opt, fmt.Errorf("-bind %q: not an IP address", bind)
		}
		opt.Listen.LocalAddr = a
	}
	// Neither: a nil interface, which rdmanet takes as loopback. The chat
	// never picks the default route's interface by itself.
	switch backend {
	case rdmanet.BackendAuto, rdmanet.BackendSoftware, rdmanet.BackendRDMACore:
		opt.Listen.Backend = backend
	default:
		return opt, fmt.Errorf("-backend %q: want auto, software or rdma-core", backend)
	}
	opt.Listen.DisableLoopback = !loopback
	opt.joinWait = 30 * time.Second
	return opt, nil
}

// defaultNick is the user's login name, made into a valid nick.
func defaultNick() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	name = strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7F {
			return '_'
		}
		return r
	}, name)
	for len(name) > maxNick {
		name = name[:len(name)-1]
	}
	if ValidNick(name) != nil {
		return "anonymous"
	}
	return name
}
