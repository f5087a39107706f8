//go:build linux

package soft

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-rdma/rdmanet/internal/roce"
)

// holder is who holds UDP port 4791 in this network namespace, as far as
// the process can tell.
type holder struct {
	pid  int    // a process with a socket bound to the port; 0 if none found
	comm string // its command name
	rxe  bool   // no process found, and the kernel's Soft-RoCE is loaded
}

// portHolder finds the holder of UDP port 4791; tests replace it.
var portHolder = findPortHolder

// findPortHolder looks for the sockets bound to UDP port 4791 in this
// network namespace (/proc/net/udp and udp6, which show the reader's
// namespace) and for a process with one of them open (/proc/*/fd). A
// socket no process holds is a kernel socket: the kernel's Soft-RoCE's
// when rdma_rxe is loaded.
func findPortHolder() holder {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		for _, ino := range portInodes(f, roce.UDPPort) {
			inodes["socket:["+ino+"]"] = true
		}
	}
	if pid := processWith(inodes); pid != 0 { // none for no inode
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		return holder{pid: pid, comm: strings.TrimSpace(string(comm))}
	}
	_, err := os.Stat("/sys/module/rdma_rxe")
	return holder{rxe: err == nil}
}

// portInodes returns the inodes of the sockets in a /proc/net/udp-format
// file whose local port is port; none where the file cannot be read. The
// header line's local_address column is a name, not an address with the
// port.
func portInodes(file string, port int) []string {
	b, _ := os.ReadFile(file)
	suffix := fmt.Sprintf(":%04X", port)
	var out []string
	for line := range strings.Lines(string(b)) {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
		fs := strings.Fields(line)
		if len(fs) >= 10 && strings.HasSuffix(fs[1], suffix) && fs[9] != "0" {
			out = append(out, fs[9])
		}
	}
	return out
}

// processWith returns the pid of a process with an fd open on one of the
// sockets (links "socket:[inode]"), this process last, or 0.
func processWith(sockets map[string]bool) int {
	self := os.Getpid()
	procs, _ := os.ReadDir("/proc")
	found := 0
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name(), "fd")
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && sockets[l] {
				if pid != self {
					return pid
				}
				found = pid
				break
			}
		}
	}
	return found
}

// why says what the holder is, for a bind error.
func (h holder) why() string {
	switch {
	case h.pid == os.Getpid():
		return fmt.Sprintf("another socket of this process (pid %d) holds it without SO_REUSEADDR", h.pid)
	case h.pid != 0:
		return fmt.Sprintf("process %d (%s) holds it in this network namespace: stop it, or run the software backend in another namespace", h.pid, h.comm)
	case h.rxe:
		return "the kernel's Soft-RoCE (rdma_rxe) binds it in this network namespace: use the rdma-core backend here, or the software backend in another namespace"
	}
	return "another process or a kernel socket holds it (`ss -ulpn 'sport = :4791'` shows which): stop it, or run the software backend in another namespace"
}
