// Package peer is the two-host harness's remote control: an agent that runs
// in the second VM ("b") of `make test-rxe2` and starts, feeds, waits for and
// stops named commands on request, and the client that tests in the first VM
// ("a") use to drive it. The protocol is JSON over HTTP on the virtual link
// between the two VMs (TCP; nothing else is reachable from either VM).
//
// Every command's stdout and stderr are kept together, in order, and handed
// back whole; a test matches lines in them (a helper prints "READY" when it
// has joined its groups, for instance).
package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// DefaultPort is the agent's TCP port.
const DefaultPort = 7379

// StartRequest starts a named command. Env is added to the agent's own
// environment; Stdin keeps a pipe open for Feed.
type StartRequest struct {
	Name  string   `json:"name"`
	Argv  []string `json:"argv"`
	Env   []string `json:"env,omitempty"`
	Dir   string   `json:"dir,omitempty"`
	Stdin bool     `json:"stdin,omitempty"`
}

// WaitRequest waits until the named command's output contains Until (when
// set) or the command exits, for at most Timeout.
type WaitRequest struct {
	Name    string        `json:"name"`
	Until   string        `json:"until,omitempty"`
	Timeout time.Duration `json:"timeout"`
}

// FeedRequest writes Data to the named command's stdin; Close closes it
// after.
type FeedRequest struct {
	Name  string `json:"name"`
	Data  string `json:"data"`
	Close bool   `json:"close,omitempty"`
}

// Result is a command's state: its output so far and, once it exited, its
// exit code (-1 when killed by a signal or not started).
type Result struct {
	Name    string `json:"name"`
	Output  string `json:"output"`
	Exited  bool   `json:"exited"`
	Code    int    `json:"code"`
	Matched bool   `json:"matched"` // WaitRequest.Until was seen
	Err     string `json:"err,omitempty"`
	// The CPU the command used, once it exited (a benchmark's diagnosis).
	UserTime time.Duration `json:"user_time,omitempty"`
	SysTime  time.Duration `json:"sys_time,omitempty"`
}

// Lines returns the output's lines that contain sub.
func (r Result) Lines(sub string) []string {
	var out []string
	for _, l := range strings.Split(r.Output, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// --- the agent ----------------------------------------------------------------

type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	mu    sync.Mutex
	out   bytes.Buffer
	code  int
	err   error
	user  time.Duration
	sys   time.Duration
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) result(name, until string) Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := Result{Name: name, Output: p.out.String(), Code: -1}
	select {
	case <-p.done:
		r.Exited, r.Code = true, p.code
		r.UserTime, r.SysTime = p.user, p.sys
		if p.err != nil {
			r.Err = p.err.Error()
		}
	default:
	}
	r.Matched = until != "" && strings.Contains(r.Output, until)
	return r
}

// Agent runs commands for a remote client. The zero value is not usable:
// call NewAgent.
type Agent struct {
	mu    sync.Mutex
	procs map[string]*proc
	quit  chan struct{}
	once  sync.Once
}

// NewAgent returns an agent with no commands.
func NewAgent() *Agent {
	return &Agent{procs: map[string]*proc{}, quit: make(chan struct{})}
}

// Quit is closed when a client asks the agent to quit.
func (a *Agent) Quit() <-chan struct{} { return a.quit }

// Handler serves the protocol: POST /start, /wait, /feed, /stop, /quit,
// each taking and returning JSON.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /start", handle(a.start))
	mux.HandleFunc("POST /wait", handle(a.wait))
	mux.HandleFunc("POST /feed", handle(a.feed))
	mux.HandleFunc("POST /stop", handle(a.stop))
	mux.HandleFunc("POST /quit", handle(func(struct{}) (Result, error) {
		a.once.Do(func() { close(a.quit) })
		return Result{}, nil
	}))
	return mux
}

func handle[Req any](f func(Req) (Result, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := f(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	}
}

func (a *Agent) get(name string) (*proc, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.procs[name]
	if p == nil {
		return nil, fmt.Errorf("no command named %q", name)
	}
	return p, nil
}

func (a *Agent) start(req StartRequest) (Result, error) {
	if req.Name == "" || len(req.Argv) == 0 {
		return Result{}, errors.New("start: name and argv are required")
	}
	a.mu.Lock()
	if old := a.procs[req.Name]; old != nil {
		select {
		case <-old.done:
		default:
			a.mu.Unlock()
			return Result{}, fmt.Errorf("start: %q is still running", req.Name)
		}
	}
	p := &proc{done: make(chan struct{}), code: -1}
	a.procs[req.Name] = p
	a.mu.Unlock()

	p.cmd = exec.Command(req.Argv[0], req.Argv[1:]...)
	p.cmd.Env = append(os.Environ(), req.Env...)
	p.cmd.Dir = req.Dir
	p.cmd.Stdout, p.cmd.Stderr = p, p
	// Its own process group, so that Stop reaches what it started too.
	p.cmd.SysProcAttr = ownProcessGroup()
	if req.Stdin {
		w, err := p.cmd.StdinPipe()
		if err != nil {
			p.err = err
			close(p.done)
			return p.result(req.Name, ""), nil
		}
		p.stdin = w
	}
	if err := p.cmd.Start(); err != nil {
		p.err = err
		close(p.done)
		return p.result(req.Name, ""), nil
	}
	go func() {
		err := p.cmd.Wait()
		p.mu.Lock()
		p.code = p.cmd.ProcessState.ExitCode()
		p.user, p.sys = p.cmd.ProcessState.UserTime(), p.cmd.ProcessState.SystemTime()
		if err != nil && p.code != 0 {
			p.err = err
		}
		p.mu.Unlock()
		close(p.done)
	}()
	// Started: not p.result, which for a command that already exited
	// with a failing code carries Exited and Err, and reads as a start
	// that failed (Client.Start).
	return Result{Name: req.Name, Code: -1}, nil
}

func (a *Agent) wait(req WaitRequest) (Result, error) {
	p, err := a.get(req.Name)
	if err != nil {
		return Result{}, err
	}
	deadline := time.After(req.Timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r := p.result(req.Name, req.Until)
		if r.Matched || r.Exited {
			return r, nil
		}
		select {
		case <-deadline:
			return r, nil
		case <-tick.C:
		}
	}
}

func (a *Agent) feed(req FeedRequest) (Result, error) {
	p, err := a.get(req.Name)
	if err != nil {
		return Result{}, err
	}
	if p.stdin == nil {
		return Result{}, fmt.Errorf("feed: %q was started without stdin", req.Name)
	}
	if _, err := io.WriteString(p.stdin, req.Data); err != nil {
		return Result{}, fmt.Errorf("feed %q: %w", req.Name, err)
	}
	if req.Close {
		p.stdin.Close()
	}
	return p.result(req.Name, ""), nil
}

// stop sends SIGINT to the command's process group, then SIGKILL after 5 s.
func (a *Agent) stop(req WaitRequest) (Result, error) {
	p, err := a.get(req.Name)
	if err != nil {
		return Result{}, err
	}
	stopProc(p)
	return p.result(req.Name, ""), nil
}

func stopProc(p *proc) {
	select {
	case <-p.done:
		return
	default:
	}
	if p.cmd.Process == nil {
		return
	}
	signalGroup(p.cmd.Process, false)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		signalGroup(p.cmd.Process, true)
		<-p.done
	}
}

// StopAll stops every command still running.
func (a *Agent) StopAll() {
	a.mu.Lock()
	ps := make([]*proc, 0, len(a.procs))
	for _, p := range a.procs {
		ps = append(ps, p)
	}
	a.mu.Unlock()
	for _, p := range ps {
		stopProc(p)
	}
}

// --- the client ---------------------------------------------------------------

// Client drives an agent.
type Client struct {
	base string
	hc   *http.Client
}

// Dial returns a client for the agent at addr (host:port), after checking
// that it answers within timeout.
func Dial(addr string, timeout time.Duration) (*Client, error) {
	c := &Client{base: "http://" + addr, hc: &http.Client{}}
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("peer agent at %s: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *Client) call(ctx context.Context, path string, req any) (Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Result{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return Result{}, err
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return Result{}, fmt.Errorf("peer %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return Result{}, fmt.Errorf("peer %s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	var r Result
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return Result{}, fmt.Errorf("peer %s: %w", path, err)
	}
	return r, nil
}

// Start starts a command on the peer. A command that could not be started
// comes back as a Result with Exited set and Err saying why.
func (c *Client) Start(req StartRequest) (Result, error) {
	r, err := c.call(context.Background(), "/start", req)
	if err == nil && r.Exited && r.Err != "" {
		err = fmt.Errorf("peer: start %q: %s", req.Name, r.Err)
	}
	return r, err
}

// Wait waits for the command to print until (if not empty) or to exit, at
// most timeout; the Result says which happened.
func (c *Client) Wait(name, until string, timeout time.Duration) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	return c.call(ctx, "/wait", WaitRequest{Name: name, Until: until, Timeout: timeout})
}

// Feed writes data to the command's stdin (closing it after when close is
// set).
func (c *Client) Feed(name, data string, close bool) error {
	_, err := c.call(context.Background(), "/feed", FeedRequest{Name: name, Data: data, Close: close})
	return err
}

// Stop interrupts the command (SIGINT to its process group, SIGKILL 5 s
// later) and returns its final state.
func (c *Client) Stop(name string) (Result, error) {
	return c.call(context.Background(), "/stop", WaitRequest{Name: name})
}

// Run starts a command and waits for it to exit, at most timeout.
func (c *Client) Run(name string, timeout time.Duration, argv ...string) (Result, error) {
	if _, err := c.Start(StartRequest{Name: name, Argv: argv}); err != nil {
		return Result{}, err
	}
	r, err := c.Wait(name, "", timeout)
	if err == nil && !r.Exited {
		r, _ = c.Stop(name)
		err = fmt.Errorf("peer: %s did not exit within %v:\n%s", strings.Join(argv, " "), timeout, r.Output)
	}
	return r, err
}

// Quit asks the agent to stop its commands and exit (the peer VM then
// powers off).
func (c *Client) Quit() error {
	_, err := c.call(context.Background(), "/quit", struct{}{})
	return err
}
