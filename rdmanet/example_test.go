//go:build linux

package rdmanet_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
)

// Two conns on one group, on the software backend over loopback: what one
// writes to the group, both read (loopback is on, as with UDP).
func ExampleListenMulticast() {
	group := &net.UDPAddr{IP: net.IPv4(239, 77, 250, 1)}
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware}
	a, err := lc.ListenMulticast(context.Background(), "rdma", nil, group) // nil: loopback
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := lc.ListenMulticast(context.Background(), "rdma", nil, group)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if _, err := a.WriteTo([]byte("hello, group"), group); err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, b.MTU())
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := b.ReadFrom(buf)
	if err != nil {
		log.Fatal(err)
	}
	sender := from.(*rdmanet.Addr)
	fmt.Printf("%q, sent by a: %t\n", buf[:n], *sender == *a.LocalAddr().(*rdmanet.Addr))
	fmt.Println("MTU", b.MTU(), "backend", b.Backend().Name)
	// Output:
	// "hello, group", sent by a: true
	// MTU 4096 backend software
}

// ReadLend hands out the receive buffer itself; Release gives it back.
func ExampleConn_ReadLend() {
	group := &net.UDPAddr{IP: net.IPv4(239, 77, 250, 2)}
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware}
	c, err := lc.ListenMulticast(context.Background(), "rdma", nil, group)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.WriteTo([]byte("no copy"), group)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	d, err := c.ReadLend()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", d.Payload)
	d.Release() // the buffer goes back to the receive ring
	// Output: no copy
}

// Porting a UDP multicast sender. A UDP program dials the group:
//
//	c, err := net.DialUDP("udp4", nil, group)
//	c.Write(msg)
//
// rdmanet has no Dial: a sender is a conn on the group as well. A full
// member (the default, as ListenMulticast gives it) also receives the
// group's traffic, its own datagrams included unless loopback is off; a
// send-only member (ListenConfig.SendOnly) receives nothing and is what a
// sender that never reads wants.
func Example_sender() {
	group := &net.UDPAddr{IP: net.IPv4(239, 77, 250, 3), Port: 7700} // the port is ignored

	// The receiver, where UDP has net.ListenMulticastUDP("udp4", nil, group).
	rx, err := rdmanet.ListenMulticast("rdma", nil, group) // nil interface: loopback
	if err != nil {
		log.Fatal(err)
	}
	defer rx.Close()

	// The sender, where UDP has net.DialUDP("udp4", nil, group).
	lc := rdmanet.ListenConfig{SendOnly: true}
	tx, err := lc.ListenMulticast(context.Background(), "rdma", nil, group)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Close()
	if _, err := tx.WriteTo([]byte("hello, receivers"), group); err != nil {
		log.Fatal(err)
	}

	buf := make([]byte, rx.MTU())
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := rx.ReadFrom(buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", buf[:n])
	// Output: hello, receivers
}

// A SendBuffer is registered memory a conn sends from without a copy.
// Its bytes may change once the send completed: the program keeps the
// send count after each write and waits for it before rewriting.
func ExampleConn_NewSendBuffer() {
	group := &net.UDPAddr{IP: net.IPv4(239, 77, 250, 4)}
	lc := rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware}
	c, err := lc.ListenMulticast(context.Background(), "rdma", nil, group)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	sb, err := c.NewSendBuffer(c.MTU())
	if err != nil {
		log.Fatal(err)
	}
	slot := sb.Bytes()[:c.MTU()]
	var posted uint64 // the send count after the slot's last write
	for i := range 3 {
		if err := c.WaitSends(posted); err != nil { // the slot's last send completed
			log.Fatal(err)
		}
		n := copy(slot, fmt.Sprintf("message %d", i))
		if _, err := c.WriteTo(slot[:n], group); err != nil {
			log.Fatal(err)
		}
		posted = c.SendsPosted()
	}
	buf := make([]byte, c.MTU())
	for range 3 {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _, err := c.ReadFrom(buf) // loopback: the conn reads its own
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s\n", buf[:n])
	}
	fmt.Println("posted from registered memory:", c.Stats().SentRegistered)
	// Output:
	// message 0
	// message 1
	// message 2
	// posted from registered memory: 3
}
