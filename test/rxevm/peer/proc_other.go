//go:build !linux

package peer

import (
	"os"
	"syscall"
)

// The agent runs in the Linux VMs of `make test-rxe2`; elsewhere it only
// has to build: a command gets no process group of its own and only the
// command itself is signalled.
func ownProcessGroup() *syscall.SysProcAttr { return nil }

func signalGroup(p *os.Process, kill bool) {
	if kill {
		p.Kill()
		return
	}
	p.Signal(os.Interrupt)
}
