package rdmanet

// The providers register themselves with internal/verbs.
import (
	_ "github.com/go-rdma/rdmanet/internal/verbs/rdmacore"
	_ "github.com/go-rdma/rdmanet/internal/verbs/soft"
)
