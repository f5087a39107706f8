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
