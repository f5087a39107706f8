//go:build linux

package soft

import (
	"testing"

	"github.com/go-rdma/rdmanet/internal/verbs"
)

// internalQP is a QP bound on lo with cfg, closed when t ends, for the
// tests that look inside it.
func internalQP(t *testing.T, cfg verbs.QPConfig) *QP {
	t.Helper()
	id, err := Provider{}.Bind(verbs.BindConfig{})
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	t.Cleanup(func() { id.Close() })
	qp, err := id.CreateQP(cfg)
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	return qp.(*QP)
}
