package verbs

import "errors"

// ErrPortDown means the port is not ACTIVE (its link is down): a QP cannot
// be brought back to work yet.
var ErrPortDown = errors.New("verbs: port not active")
