package reliable_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/go-rdma/rdmanet/rdmanet"
	"github.com/go-rdma/rdmanet/rdmanet/reliable"
)

// A sender and a receiver on one group, on the software backend over
// loopback: a 20 KiB message crosses as several datagrams and arrives
// whole.
func ExampleListenConfig_ListenMulticast() {
	group := &net.UDPAddr{IP: net.IPv4(239, 78, 250, 1)}
	lc := reliable.ListenConfig{
		Conn:   rdmanet.ListenConfig{Backend: rdmanet.BackendSoftware},
		Config: reliable.Config{}, // the defaults
	}
	ctx := context.Background()
	rx, err := lc.ListenMulticast(ctx, "rdma", nil, group) // nil interface: loopback
	if err != nil {
		log.Fatal(err)
	}
	defer rx.Close()
	tx, err := lc.ListenMulticast(ctx, "rdma", nil, group)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Close()

	msg := bytes.Repeat([]byte("reliable "), 20<<10/9)
	if _, err := tx.WriteTo(msg, group); err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, rx.MaxMessage())
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := rx.ReadFrom(buf)
	var loss *reliable.LossError
	switch {
	case errors.As(err, &loss):
		fmt.Println(loss.Messages, "messages lost") // then keep reading
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println(n, bytes.Equal(buf[:n], msg), from.String() == tx.LocalAddr().String())
	fmt.Println("max message", rx.MaxMessage())
	// Output:
	// 20475 true true
	// max message 65536
}
