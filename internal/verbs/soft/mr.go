//go:build linux

package soft

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// Memory regions: registered arenas and the SGEs that name them.

// mr is a memory region: an arena and its LKey.
type mr struct {
	q     *QP
	lkey  uint32
	arena *verbs.Arena
}

func (m *mr) LKey() uint32        { return m.lkey }
func (m *mr) Arena() *verbs.Arena { return m.arena }

// Close deregisters the region: an SGE with its LKey fails from then on.
func (m *mr) Close() error {
	q := m.q
	q.mrMu.Lock()
	defer q.mrMu.Unlock()
	old := *q.mrs.Load()
	mrs := make([]*mr, 0, len(old))
	for _, x := range old {
		if x != m {
			mrs = append(mrs, x)
		}
	}
	q.mrs.Store(&mrs)
	return nil
}

var lkeys atomic.Uint32

// RegisterMemory registers an arena and gives it a unique LKey.
func (q *QP) RegisterMemory(a *verbs.Arena) (verbs.MR, error) {
	if a == nil || a.Len() == 0 {
		return nil, errors.New("soft: ibv_reg_mr: no arena")
	}
	q.mrMu.Lock()
	defer q.mrMu.Unlock()
	m := &mr{q: q, lkey: lkeys.Add(1), arena: a}
	old := *q.mrs.Load()
	mrs := append(old[:len(old):len(old)], m)
	q.mrs.Store(&mrs)
	return m, nil
}

var errBadLKey = errors.New("soft: SGE LKey is not registered on this QP")

// sgeBytes resolves an SGE to its bytes, bounds checked.
func (q *QP) sgeBytes(s verbs.SGE) ([]byte, error) {
	for _, m := range *q.mrs.Load() {
		if m.lkey != s.LKey {
			continue
		}
		b := m.arena.Bytes()
		if uint64(s.Offset)+uint64(s.Length) > uint64(len(b)) {
			return nil, fmt.Errorf("soft: SGE [%d, +%d) outside its MR of %d bytes", s.Offset, s.Length, len(b))
		}
		return b[s.Offset : s.Offset+s.Length : s.Offset+s.Length], nil
	}
	return nil, errBadLKey
}
