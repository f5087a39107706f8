package verbs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The model declares no interface that only one provider implements: an
// optional interface one backend implements and the core type-asserts is
// a trick of that backend leaking upwards. Every interface declared here
// must be implemented by both providers, which their code shows by a
// compile-time assertion (var _ verbs.X = ...) or by a function of theirs
// whose result is a verbs.X (a CQ's NewWaiter, a QP's CreateAH): both
// compile only if the provider's type implements X.
func TestEveryInterfaceHasBothProviders(t *testing.T) {
	declared := interfacesIn(t, ".")
	if len(declared) < 5 {
		t.Fatalf("found %d interfaces in package verbs, want more: %v", len(declared), declared)
	}
	for _, dir := range []string{"soft", "rdmacore"} {
		shown := implementedIn(t, dir)
		for _, name := range declared {
			if !shown[name] {
				t.Errorf("verbs.%s: provider %s does not implement it (no var _ verbs.%s = ... and no function returning one)", name, dir, name)
			}
		}
	}
}

// parseDir parses the non-test Go files of dir, every build tag included.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		if _, serr := os.Stat("ifaces_test.go"); serr != nil {
			// the test binary runs without its package's source (the rxe VM)
			t.Skip("needs the source tree (go test in the repository; not in the rxe VM)")
		}
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// interfacesIn lists the exported interface types declared in dir.
func interfacesIn(t *testing.T, dir string) []string {
	var out []string
	for _, f := range parseDir(t, dir) {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if _, isIface := ts.Type.(*ast.InterfaceType); isIface && ts.Name.IsExported() {
				out = append(out, ts.Name.Name)
			}
			return false
		})
	}
	sort.Strings(out)
	return out
}

// implementedIn returns the names X for which the code in dir has var _
// verbs.X = v, or a function with a verbs.X result.
func implementedIn(t *testing.T, dir string) map[string]bool {
	shown := map[string]bool{}
	verbsType := func(e ast.Expr) string {
		if sel, ok := e.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "verbs" {
				return sel.Sel.Name
			}
		}
		return ""
	}
	for _, f := range parseDir(t, dir) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				if len(n.Names) == 1 && n.Names[0].Name == "_" && n.Type != nil && len(n.Values) == 1 {
					if x := verbsType(n.Type); x != "" {
						shown[x] = true
					}
				}
			case *ast.FuncDecl:
				if n.Type.Results != nil {
					for _, r := range n.Type.Results.List {
						if x := verbsType(r.Type); x != "" {
							shown[x] = true
						}
					}
				}
			}
			return true
		})
	}
	return shown
}
