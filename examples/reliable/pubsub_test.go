package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Outside the rxe VM the tests run on the software backend over
// loopback; inside it (testenv.Device names the device) on rdma-core
// bound to testenv.Addr: the software backend cannot bind UDP 4791 beside
// the kernel's rxe.
var (
	testDevice = testenv.Device()
	testAddr   = testenv.Addr()
)

// pubsub runs a publisher and subs subscribers in this process and
// returns each subscriber's output and the publisher's.
func pubsub(t *testing.T, group string, subs int, opt options) (subOut []string, pubOut string) {
	t.Helper()
	opt.Group = &net.UDPAddr{IP: net.ParseIP(group)}
	opt.Backend = "software"
	if testDevice != "" {
		opt.Backend, opt.Bind = "rdma-core", net.ParseIP(testAddr)
	}
	opt.Subscribers = subs
	opt.Wait = 30 * time.Second
	// Generous: the machine may be loaded. A subscriber that does not
	// get every message is stopped here, and its summary says so.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	outs := make([]bytes.Buffer, subs)
	errs := make([]error, subs)
	var wg sync.WaitGroup
	for i := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = subscribe(ctx, opt, &outs[i])
		}()
	}
	var pub bytes.Buffer
	require.NoError(t, publish(ctx, opt, &pub), "publisher:\n%s", pub.String())
	wg.Wait()
	for i := range subs {
		require.NoError(t, errs[i], "subscriber %d:\n%s", i, outs[i].String())
		subOut = append(subOut, outs[i].String())
	}
	return subOut, pub.String()
}

// Every subscriber prints every message, once, in order, and the
// summary counts them.
func TestPubSub(t *testing.T) {
	subs, pub := pubsub(t, "239.255.78.1", 2, options{Count: 10, Interval: time.Millisecond})
	assert.Contains(t, pub, "2 subscriber(s) heard\n")
	assert.Contains(t, pub, "sent 10 messages (10 datagrams)")
	for i, out := range subs {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 12, "subscriber %d: want a header, 10 messages and a summary:\n%s", i, out)
		head := `^subscribed to 239\.255\.78\.1: software backend, sw-lo \(lo\), MTU \d+$`
		if testDevice != "" {
			head = `^subscribed to 239\.255\.78\.1: rdma-core backend, ` + regexp.QuoteMeta(testDevice) + ` \(\S+\), MTU \d+$`
		}
		assert.Regexp(t, head, lines[0])
		for m := 1; m <= 10; m++ {
			want := fmt.Sprintf("message %d (%d bytes) from ", m, len(fmt.Sprint("message ", m)))
			assert.True(t, strings.HasPrefix(lines[m], want), "subscriber %d line %d: got %q, want %q...", i, m, lines[m], want)
		}
		assert.Equal(t, "received 10 messages (91 bytes), 0 out of order; datagrams recovered by repair 0, NAKs sent 0, messages lost 0", lines[11],
			"subscriber %d", i)
	}
}

// Messages longer than the MTU are cut into datagrams and reassembled:
// 200 messages of 10,000 bytes reach both subscribers whole and in order.
func TestPubSubFragmented(t *testing.T) {
	subs, pub := pubsub(t, "239.255.78.2", 2, options{Count: 200, Size: 10000, Quiet: true})
	assert.Regexp(t, `sent 200 messages \(\d+ datagrams\)`, pub)
	for i, out := range subs {
		assert.Contains(t, out, "received 200 messages (2000000 bytes), 0 out of order;", "subscriber %d:\n%s", i, out)
		assert.Contains(t, out, "messages lost 0\n", "subscriber %d:\n%s", i, out)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"-pub", "-sub"}, {"-sub", "extra"}, {"-pub", "-group", "nonsense"}} {
		var out, errb bytes.Buffer
		assert.Equal(t, 2, run(args, &out, &errb), "run %q: stderr %s", args, errb.String())
	}
}
