// Command reliable is a publisher and a subscriber on rdmanet/reliable:
// every message the publisher sends reaches every subscriber once and in
// order, lost datagrams repaired. In two terminals:
//
//	go run ./examples/reliable -sub
//	go run ./examples/reliable -pub
//
// With no interface flag both use the software backend on loopback; over
// an RDMA fabric, -bind (or -iface) picks the port. See README.md.
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
	"syscall"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// defaultGroup is administratively scoped (RFC 2365).
const defaultGroup = "239.255.77.2"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program, callable from tests; it returns the exit
// status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reliable", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		pub      = fs.Bool("pub", false, "publish: send -count messages to the group")
		sub      = fs.Bool("sub", false, "subscribe: print the group's messages")
		group    = fs.String("group", defaultGroup, "the multicast group")
		iface    = fs.String("iface", "", "the network interface whose RDMA port to use (default: loopback)")
		bind     = fs.String("bind", "", "the local IP address whose RDMA port to use (instead of -iface)")
		backend  = fs.String("backend", rdmanet.BackendSoftware, "software, rdma-core or auto (RDMANET_BACKEND overrides)")
		count    = fs.Int("count", 10, "messages to publish; with -sub, exit after this many (0: run until interrupted)")
		size     = fs.Int("size", 0, "publish messages of this many bytes (up to 65536; longer than the MTU: fragmented)")
		interval = fs.Duration("interval", 100*time.Millisecond, "time between published messages")
		subs     = fs.Int("subs", 1, "publish once this many subscribers are heard")
		wait     = fs.Duration("wait", 30*time.Second, "how long the publisher waits for -subs subscribers")
		quiet    = fs.Bool("quiet", false, "with -sub: print only the summary")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *pub == *sub || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: reliable -pub | -sub [flags]")
		fs.PrintDefaults()
		return 2
	}
	opt := options{
		Backend: *backend, Count: *count, Size: *size, Interval: *interval,
		Subscribers: *subs, Wait: *wait, Quiet: *quiet,
	}
	opt.Group = &net.UDPAddr{IP: net.ParseIP(*group)}
	if !opt.Group.IP.IsMulticast() {
		fmt.Fprintf(stderr, "reliable: -group %q: not a multicast IP address\n", *group)
		return 2
	}
	var err error
	if *iface != "" {
		if opt.Iface, err = net.InterfaceByName(*iface); err != nil {
			fmt.Fprintf(stderr, "reliable: -iface: %v\n", err)
			return 2
		}
	}
	if *bind != "" {
		if opt.Bind = net.ParseIP(*bind); opt.Bind == nil {
			fmt.Fprintf(stderr, "reliable: -bind %q: not an IP address\n", *bind)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *pub {
		err = publish(ctx, opt, stdout)
	} else {
		err = subscribe(ctx, opt, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "reliable: %v\n", err)
		return 1
	}
	return 0
}
