package testenv

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// notYet are the files that still name RDMANET_TEST_* variables
// themselves (the two-host suite); each should read them through this package and leave the list.
var notYet = map[string]bool{
	"test/rxevm/twohost/bench_test.go":   true,
	"test/rxevm/twohost/diag_test.go":    true,
	"test/rxevm/twohost/env_test.go":     true,
	"test/rxevm/twohost/helpers_test.go": true,
	"test/rxevm/twohost/sysmon_test.go":  true,
	// The mutation tool sets RDMANET_TEST_NFT=1 for the tests it runs,
	// as CI's script does; it is no test.
	"internal/tools/mutate/main.go": true,
}

// The RDMANET_TEST_* variables are named in this package and nowhere else
// in the module's Go code (comments aside), so that docs/testing.md's
// table is the whole list.
func TestVariablesNamedHereOnly(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skip("needs the source tree (go test in the repository; not in the rxe VM)")
	}
	named := regexp.MustCompile(`"RDMANET_TEST_[A-Z0-9_]*`)
	self, _ := filepath.Abs(".")
	found := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == self || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		found++
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		hit := false
		for _, line := range strings.Split(string(b), "\n") {
			if i := strings.Index(line, "//"); i >= 0 {
				line = line[:i]
			}
			if named.MatchString(line) {
				hit = true
				if !notYet[rel] {
					t.Errorf("%s names %s itself: use internal/testenv", rel, named.FindString(line)[1:])
				}
			}
		}
		if notYet[rel] && !hit {
			t.Logf("%s no longer names RDMANET_TEST_* variables: it can leave notYet", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 100 {
		t.Errorf("walked %d Go files under %s, want the whole module", found, root)
	}
}
