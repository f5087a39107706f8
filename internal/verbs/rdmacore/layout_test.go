//go:build linux && cgo

package rdmacore

import "testing"

func TestLayoutsMatchC(t *testing.T) {
	if err := checkLayouts(); err != nil {
		t.Fatal(err)
	}
}
