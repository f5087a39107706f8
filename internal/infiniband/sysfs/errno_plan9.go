package sysfs

import "errors"

// Plan 9 has no ENODEV (and no sysfs): nothing matches.
var errNoDevice = errors.New("infiniband: no device")
