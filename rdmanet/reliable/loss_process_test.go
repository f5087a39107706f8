package reliable

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rdma/rdmanet/internal/testenv"
)

// The loss matrix in separate processes: 1 sender and 4 receivers, each
// its own process (this test binary re-executed in a role), in one network
// namespace where nftables drops a fraction of the UDP 4791 packets (see
// netns_test.go). Every receiver must read every message exactly once and
// in order, with no loss reported. The counts are CI-sized; with
// RDMANET_TEST_FULL=1 they are the issue's: 1,000,000 messages of 64 B
// and of 1 KiB, 100,000 of 16 KiB. FlowMin keeps the sender within the
// window of the slowest receiver, as in TestKernelLoss.
//
// Each cell logs one line: delivered/expected per receiver, losses
// reported, the data datagrams lost (the most one receiver recovered by
// repair: loss on lo is taken once per packet, for every receiver), NAKs
// and repairs per lost datagram, the packets nftables dropped and the wall
// time from the first write to the last receiver's last read.
func TestKernelLossProcesses(t *testing.T) {
	full := testenv.Full()
	for _, loss := range []int{100, 1000, 10000} {
		for _, m := range []struct{ ci, full, size int }{
			{10000, 1000000, 64},
			{5000, 1000000, 1024},
			{1000, 100000, 16 << 10},
		} {
			t.Run(fmt.Sprintf("loss=%g%%/size=%d", float64(loss)/1000, m.size), func(t *testing.T) {
				if lossInNetns(t, loss, "") < 0 {
					return
				}
				count := m.ci
				if full {
					count = m.full
				} else if testing.Short() {
					count /= 10
				}
				runProcesses(t, 4, count, m.size, loss)
			})
		}
	}
}

const (
	envRole    = "RDMANET_RELIABLE_ROLE" // sender or receiver: TestKernelLossRole plays it
	envRoleRun = "RDMANET_RELIABLE_RUN"  // the role's group, count and size: "239.78.1.2:4791 count size"
	rolePrefix = "reliable-role: "       // the lines a role writes for the coordinator
)

// roleResult is what a role process reports, as JSON on one line.
type roleResult struct {
	Stats   Stats
	Dropped uint64 // datagrams the rdmanet conn dropped (Stats.Dropped, all reasons)
	Err     string
}

// TestKernelLossRole is one process of TestKernelLossProcesses: it runs only
// when RDMANET_RELIABLE_ROLE names its role.
//
// A receiver joins, says "ready", reads count messages of size, checking
// each is the next one and intact, and reports its stats. A sender joins,
// waits for the receivers (FlowMin holds back only for those it knows),
// says "sending", writes count messages, and when its standard input ends
// (the coordinator closes it once every receiver is done) closes and
// reports its stats.
func TestKernelLossRole(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("a process of TestKernelLossProcesses, run by it")
	}
	var addr string
	var count, size, receivers int
	if _, err := fmt.Sscan(os.Getenv(envRoleRun), &addr, &count, &size, &receivers); err != nil {
		t.Fatalf("%s=%q: %v", envRoleRun, os.Getenv(envRoleRun), err)
	}
	group, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	say := func(words ...any) { fmt.Println(append([]any{strings.TrimSpace(rolePrefix)}, words...)...) }
	report := func(c *Conn, err error) {
		res := roleResult{Stats: c.Stats()}
		for _, n := range c.Conn().Stats().Dropped {
			res.Dropped += n
		}
		if err != nil {
			res.Err = err.Error()
		}
		b, _ := json.Marshal(res)
		say("result", string(b))
	}
	c := listenT(t, group, Config{FlowControl: FlowMin})
	switch role {
	case "receiver":
		say("ready")
		losses, err := readAll(c, count, size, 20*time.Second)
		if err == nil && losses != 0 {
			err = fmt.Errorf("%d messages reported lost", losses)
		}
		report(c, err)
	case "sender":
		waitReceivers(t, c, receivers)
		say("sending")
		b := make([]byte, size)
		var err error
		for i := uint64(0); i < uint64(count) && err == nil; i++ {
			_, err = c.WriteTo(payload(b, i), group)
		}
		if err == nil {
			io.Copy(io.Discard, os.Stdin)
		}
		c.Close()
		report(c, err)
	default:
		t.Fatalf("%s=%q: want sender or receiver", envRole, role)
	}
}

// roleProc is a role process and what it said.
type roleProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // "ready", "sending", "result ..." as said
	output strings.Builder
	mu     sync.Mutex
	done   chan struct{} // closed when it exited, err set
	err    error
}

func startRole(ctx context.Context, role, run string) (*roleProc, error) {
	return startProcess(ctx, "TestKernelLossRole", envRole+"="+role, envRoleRun+"="+run)
}

// startProcess re-executes this test binary to run only the test named,
// with env added to the environment.
func startProcess(ctx context.Context, test string, env ...string) (*roleProc, error) {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^"+test+"$", "-test.timeout", "0")
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &roleProc{cmd: cmd, stdin: stdin, lines: make(chan string, 4), done: make(chan struct{})}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.output.WriteString(line + "\n")
			p.mu.Unlock()
			if s, ok := strings.CutPrefix(line, rolePrefix); ok {
				p.lines <- s
			}
		}
		io.Copy(io.Discard, out)
		p.err = cmd.Wait()
		close(p.done)
		close(p.lines)
	}()
	return p, nil
}

func (p *roleProc) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// expect waits for the process to say word (the rest of the line is
// returned), failing the test if it exits first or the context ends.
func (p *roleProc) expect(ctx context.Context, t *testing.T, name, word string) string {
	t.Helper()
	for {
		select {
		case s, ok := <-p.lines:
			if !ok {
				<-p.done
				t.Fatalf("%s exited before saying %q: %v\n%s", name, word, p.err, p)
			}
			if rest, ok := strings.CutPrefix(s, word); ok {
				return strings.TrimSpace(rest)
			}
		case <-ctx.Done():
			t.Fatalf("%s did not say %q: %v\n%s", name, word, ctx.Err(), p)
		}
	}
}

func (p *roleProc) result(ctx context.Context, t *testing.T, name string) roleResult {
	t.Helper()
	var res roleResult
	if err := json.Unmarshal([]byte(p.expect(ctx, t, name, "result")), &res); err != nil {
		t.Fatalf("%s: result: %v\n%s", name, err, p)
	}
	if res.Err != "" {
		t.Fatalf("%s: %s\n%s", name, res.Err, p)
	}
	return res
}

// runProcesses runs 1 sender and n receivers as processes in this
// namespace and checks and logs what they report.
func runProcesses(t *testing.T, n, count, size, loss int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	run := fmt.Sprintf("%s %d %d %d", newGroup(), count, size, n)
	var procs []*roleProc
	t.Cleanup(func() {
		cancel() // kills any still running
		for _, p := range procs {
			p.stdin.Close()
			<-p.done
		}
	})
	rx := make([]*roleProc, n)
	for i := range rx {
		p, err := startRole(ctx, "receiver", run)
		if err != nil {
			t.Fatal(err)
		}
		rx[i] = p
		procs = append(procs, p)
	}
	for i, p := range rx {
		p.expect(ctx, t, fmt.Sprintf("receiver %d", i), "ready")
	}
	tx, err := startRole(ctx, "sender", run)
	if err != nil {
		t.Fatal(err)
	}
	procs = append(procs, tx)
	tx.expect(ctx, t, "sender", "sending")
	start := time.Now()
	rs := make([]roleResult, n)
	for i, p := range rx {
		rs[i] = p.result(ctx, t, fmt.Sprintf("receiver %d", i))
	}
	took := time.Since(start)
	tx.stdin.Close()
	ts := tx.result(ctx, t, "sender").Stats

	var line strings.Builder
	fmt.Fprintf(&line, "%d receivers (processes) x %d msgs of %d B at %g%% loss: %v (%.0f msgs/s); delivered",
		n, count, size, float64(loss)/1000, took.Round(time.Millisecond), float64(count)/took.Seconds())
	var naks, lost, minLost, losses, dups, dropped uint64
	minLost = ^uint64(0)
	for i, r := range rs {
		st := r.Stats
		fmt.Fprintf(&line, " %d/%d", st.MessagesReceived, count)
		naks += st.NAKsSent
		lost, minLost = max(lost, st.Recovered), min(minLost, st.Recovered)
		losses += st.LossesReported
		dups += st.Duplicates
		dropped += r.Dropped
		if st.MessagesReceived != uint64(count) || st.LossesReported != 0 {
			t.Errorf("receiver %d: delivered %d of %d, %d losses reported; stats %+v", i, st.MessagesReceived, count, st.LossesReported, st)
		}
	}
	repairs := ts.RepairsMulticast + ts.RepairsUnicast
	per := func(v uint64) float64 { return float64(v) / float64(max(lost, 1)) }
	fmt.Fprintf(&line, "; losses reported %d; %d datagrams sent, %d lost (recovered by repair, most of one receiver; least %d); NAKs sent %d (%.2f per lost), received %d; repairs %d (%.2f per lost), NAKed datagrams not repeated %d; duplicates %d; datagrams dropped by the conns %d; packets dropped by nftables %s",
		losses, ts.DatagramsSent, lost, minLost, naks, per(naks), ts.NAKsReceived, repairs, per(repairs), ts.RepairsSuppressed, dups, dropped, nftDropped())
	t.Log(line.String())
}

// nftDropped returns what the loss rule's counter says it dropped, or
// "?" when it cannot be read.
func nftDropped() string {
	out, err := exec.Command("nft", "list", "chain", "inet", "t", "in").CombinedOutput()
	if err != nil {
		return "?"
	}
	m := regexp.MustCompile(`counter packets (\d+)`).FindSubmatch(out)
	if m == nil {
		return "0"
	}
	if _, err := strconv.ParseUint(string(m[1]), 10, 64); err != nil {
		return "?"
	}
	return string(m[1])
}
