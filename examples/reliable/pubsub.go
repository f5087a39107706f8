package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/go-rdma/rdmanet/rdmanet/reliable"
)

// options are the program's settings, flags parsed.
type options struct {
	Group       *net.UDPAddr
	Iface       *net.Interface // nil: loopback (or Bind)
	Bind        net.IP
	Backend     string
	Count       int           // messages to publish, or to read before exiting (0: until ctx ends)
	Size        int           // bytes a published message (0: just its text)
	Interval    time.Duration // between published messages
	Subscribers int           // publish once this many are heard
	Wait        time.Duration // for them
	Quiet       bool          // subscriber: the summary only
}

// listen opens a reliable conn on the group. A publisher listens
// send-only: it does not read the group, and NAKs and status reach it by
// unicast.
func listen(ctx context.Context, opt options, sendOnly bool, cfg reliable.Config) (*reliable.Conn, error) {
	lc := reliable.ListenConfig{
		Conn:   rdmanet.ListenConfig{Backend: opt.Backend, LocalAddr: opt.Bind, SendOnly: sendOnly},
		Config: cfg,
	}
	return lc.ListenMulticast(ctx, "rdma", opt.Iface, opt.Group)
}

// describe says where a conn runs, for the first line of output.
func describe(c *reliable.Conn) string {
	b := c.Conn().Backend()
	return fmt.Sprintf("%s backend, %s (%s), MTU %d", b.Name, b.Device, b.Netdev, c.Conn().MTU())
}

// message is the i-th published message: its text, padded with dots to
// size bytes.
func message(i, size int) []byte {
	m := []byte("message " + strconv.Itoa(i))
	for len(m) < size {
		m = append(m, '.')
	}
	return m
}

// publish waits for opt.Subscribers subscribers, sends opt.Count
// messages and closes, which waits (bounded) until every subscriber has
// them all. FlowMin: the publisher never runs more than its window ahead
// of the slowest subscriber.
func publish(ctx context.Context, opt options, out io.Writer) error {
	c, err := listen(ctx, opt, true, reliable.Config{FlowControl: reliable.FlowMin, Linger: time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(out, "publishing to %v: %s\n", opt.Group.IP, describe(c))
	if opt.Subscribers > 0 {
		fmt.Fprintf(out, "waiting for %d subscriber(s)\n", opt.Subscribers)
		deadline := time.Now().Add(opt.Wait)
		for c.Receivers() < opt.Subscribers {
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d subscribers heard after %v", c.Receivers(), opt.Subscribers, opt.Wait)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		fmt.Fprintf(out, "%d subscriber(s) heard\n", c.Receivers())
	}
	for i := 1; i <= opt.Count; i++ {
		if i > 1 && opt.Interval > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(opt.Interval):
			}
		}
		if _, err := c.WriteTo(message(i, opt.Size), opt.Group); err != nil {
			return err
		}
	}
	if err := c.Close(); err != nil {
		return err
	}
	s := c.Stats()
	fmt.Fprintf(out, "sent %d messages (%d datagrams); NAKs received %d, datagrams repaired %d\n",
		s.MessagesSent, s.DatagramsSent, s.NAKsReceived, s.RepairsMulticast+s.RepairsUnicast)
	return nil
}

// subscribe prints the group's messages until opt.Count have arrived or
// ctx ends, then a summary.
func subscribe(ctx context.Context, opt options, out io.Writer) error {
	c, err := listen(ctx, opt, false, reliable.Config{})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(out, "subscribed to %v: %s\n", opt.Group.IP, describe(c))
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, c.MaxMessage())
	// last is the number of each sender's last message, to check the
	// order: a message's number is one more than the one before it from
	// the same publisher, unless a loss was reported between them.
	last := map[string]int{}
	var got, unordered int
	for opt.Count == 0 || got < opt.Count {
		n, from, err := c.ReadFrom(buf)
		var loss *reliable.LossError
		if errors.As(err, &loss) {
			fmt.Fprintf(out, "! %d message(s) from %v lost\n", loss.Messages, &loss.From)
			delete(last, loss.From.String())
			continue
		}
		if err != nil && ctx.Err() != nil {
			fmt.Fprintln(out, "interrupted")
			break
		}
		if err != nil {
			return err
		}
		got++
		text := strings.TrimRight(string(buf[:n]), ".")
		num, _ := strconv.Atoi(strings.TrimPrefix(text, "message "))
		if prev, ok := last[from.String()]; ok && num != prev+1 {
			unordered++
			fmt.Fprintf(out, "! %q from %v after message %d\n", text, from, prev)
		}
		last[from.String()] = num
		if !opt.Quiet {
			fmt.Fprintf(out, "%s (%d bytes) from %v\n", text, n, from)
		}
	}
	s := c.Stats()
	fmt.Fprintf(out, "received %d messages (%d bytes), %d out of order; datagrams recovered by repair %d, NAKs sent %d, messages lost %d\n",
		s.MessagesReceived, s.BytesReceived, unordered, s.Recovered, s.NAKsSent, s.MessagesLost)
	return nil
}
