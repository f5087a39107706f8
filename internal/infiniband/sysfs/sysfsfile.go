package sysfs

import (
	"errors"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// readTrim reads a small sysfs file. A file that does not exist or that
// the kernel refuses to read (EINVAL, as empty GID attribute entries do)
// reports ok == false.
func readTrim(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EINVAL) || errors.Is(err, errNoDevice)
}

func listDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if absent(err) {
			return nil, nil
		}
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// numbered lists the numeric entries of a directory, in numeric order.
func numbered(dir string) ([]int, error) {
	names, err := listDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, n := range names {
		if i, err := strconv.Atoi(n); err == nil && i >= 0 {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out, nil
}
