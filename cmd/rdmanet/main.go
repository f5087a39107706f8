// Command rdmanet inspects what rdmanet sees: the RDMA backends and
// devices on this machine, and how a multicast group maps to MGIDs on each
// kind of fabric.
//
//	rdmanet devices            backends, devices, ports, GIDs, netdevs
//	rdmanet mgid 239.1.2.3     the MGIDs of a group (or the groups of an MGID)
//	rdmanet perf pingpong      latency (or throughput, loss) on loopback or a fabric
//
// It uses only the public API: "devices" prints rdmanet.Backends and
// ipoib.Discover, "mgid" ipoib's mappings.
//
// Bad input exits with status 2 and a message on stderr; a failure while
// running exits with status 1.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// env is what a subcommand may touch, so tests can run it in-process.
type env struct {
	stdout, stderr io.Writer
	root           string // sysfs root: "/" on a live system
}

// command is one subcommand. To add one, write NAME.go with its run
// function and add a line to commands.
type command struct {
	name    string
	args    string // the usage after the name
	summary string
	run     func(e *env, args []string) error
}

var commands = []command{
	{"devices", "[-root DIR]", "show the backends, and per device (RDMA and software) and port: state, MTU, link layer, GIDs", runDevices},
	{"mgid", "[-pkey P_KEY] [-scope SCOPE] GROUP|MGID", "print the MGIDs of a multicast group, or the groups an MGID comes from", runMGID},
	{"perf", perfArgs, "measure latency (pingpong) or throughput and loss over rdmanet, or over UDP with -baseline udp", runPerf},
}

// usageError is bad input: the command prints it and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

func main() {
	os.Exit(run(&env{stdout: os.Stdout, stderr: os.Stderr, root: "/"}, os.Args[1:]))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: rdmanet COMMAND [ARGS]")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
		fmt.Fprintf(w, "  %-8s   rdmanet %s %s\n", "", c.name, c.args)
	}
}

// run executes a command line and returns the exit status.
func run(e *env, args []string) int {
	if len(args) == 0 {
		usage(e.stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(e.stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(e, args[1:])
		var ue *usageError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(e.stderr, "rdmanet %s: %v\n", c.name, err)
			fmt.Fprintf(e.stderr, "usage: rdmanet %s %s\n", c.name, c.args)
			return 2
		case errors.Is(err, errFlags):
			return 2 // the flag package has said why
		default:
			fmt.Fprintf(e.stderr, "rdmanet %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "rdmanet: unknown command %q\n\n", args[0])
	usage(e.stderr)
	return 2
}

var errFlags = errors.New("bad flags")

// parseFlags parses flags that may come before or after the positional
// arguments ("mgid 239.1.2.3 -pkey 0x8001" works too) and returns the
// positional ones.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errFlags
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func newFlagSet(e *env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: rdmanet %s %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}
