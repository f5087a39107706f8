//go:build linux

// Command mutate measures how many small, plausible bugs a package's
// tests catch: it makes mutants of the package's source (one change
// each), runs the package's tests against each mutant alone, and reports
// per package how many were caught (killed) and which survived.
//
// Before the mutants of a package, its tests run once on the original
// with a coverage profile (-cover, the default): if they fail there, every
// kill would be false, and the tool stops. A mutant on a line no test
// executes (for a dropped error return: whose return no test reaches)
// survives for certain; it is reported NOCOVER and counted a survivor
// without being run.
//
// With -pertest, the baseline runs each test alone, with its own profile,
// and a mutant runs only the tests that execute its lines (all of them
// for a line outside every block, such as a constant's, and for a case
// clause's expression): a survivor then costs the tests that could kill
// it, not the whole suite. A test that
// fails alone on the original is left out of every selection (it would
// kill every mutant), and said.
//
// The mutations are the kind real bugs take:
//
//	cmp      a comparison moved across its boundary or negated:
//	         < <=, <= <, > >=, >= >, == !=, != ==
//	lit      an integer literal off by one (n+1, n-1)
//	counter  a counter call dropped: a statement x.Add(...), x.Inc(),
//	         atomic.AddUint64(...) (or another atomic.Add*)
//	errret   an `if err != nil { return ... }` block dropped (made
//	         `_ = err`, so that err stays used)
//
// and, not in the default set, gremlins' defaults that these lack, for a
// sample of kinds no test was written against:
//
//	cmpneg   an ordering comparison negated: < >=, <= >, > <=, >= <
//	arith    an arithmetic operator swapped: + -, - +, * /, / *, % *
//	incdec   x++ made x--, x-- made x++
//	neg      a unary minus dropped: -x made +x
//
// Each mutant is applied alone to a copy of the module (made once, in a
// temporary directory; the source tree is never touched), and the
// package's tests run there with a per-mutant timeout, by default in a
// private network namespace with only lo up (unshare -n, as root) and
// RDMANET_TEST_NFT=1, as CI runs them. A mutant that does not compile is
// counted apart and left out of the efficacy; one whose tests fail, or
// time out, is killed.
//
// Usage:
//
//	go run ./internal/tools/mutate [flags] ./pkg ...
//	  -n 20          mutants per package, sampled at random (0: all)
//	  -seed 1        the sample's seed
//	  -timeout 3m    per mutant
//	  -run REGEXP    passed to go test -run
//	  -skip REGEXP   passed to go test -skip (e.g. to recheck a kill by a
//	                 timing test without it)
//	  -short         passed to go test
//	  -kinds cmp,lit,counter,errret  (also cmpneg, arith, incdec, neg)
//	  -files REGEXP  only the files whose base name matches (e.g. '^(qp|cq)')
//	  -match REGEXP  only the sampled mutants whose printed line matches
//	  -netns=true    run the tests inside unshare -n
//	  -cover=true    run the tests once on the original first, with a
//	                 coverage profile; mutants of lines no test executes
//	                 are survivors, not run
//	  -list          list the mutants, run nothing
//	  -pertest       run each test alone in the baseline, then each
//	                 mutant with only the tests that execute its lines
//	  -uncovered     list the mutants no test executes (the sure
//	                 survivors: test gaps), run only the baseline
//
// `make mutate` runs it over rdmanet, rdmanet/reliable,
// internal/verbs/soft and internal/poller. It is not part of CI: a
// whole package takes hours.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// mutant is one change to one file: the bytes [off, end) replaced by repl.
type mutant struct {
	file     string // relative to the module root
	line     int
	endLine  int // the last line the change spans
	kind     string
	off, end int
	orig     string
	repl     string
	// inCase: m changes a case clause's expression, which go test -cover
	// counts in no block of its own (its line falls in the block of the
	// clause before, or of none): covered() cannot tell, so it runs.
	inCase bool
}

func (m mutant) String() string {
	o := strings.Join(strings.Fields(m.orig), " ")
	if len(o) > 60 {
		o = o[:57] + "..."
	}
	r := m.repl
	if r == "" {
		r = "(removed)"
	}
	return fmt.Sprintf("%s:%d: %s %q -> %s", m.file, m.line, m.kind, o, r)
}

type outcome int

const (
	killed outcome = iota
	survived
	noBuild
)

func main() {
	n := flag.Int("n", 20, "mutants per package, sampled at random (0: all)")
	seed := flag.Uint64("seed", 1, "the sample's seed")
	timeout := flag.Duration("timeout", 3*time.Minute, "per mutant")
	run := flag.String("run", "", "go test -run")
	skip := flag.String("skip", "", "go test -skip")
	short := flag.Bool("short", false, "go test -short")
	kinds := flag.String("kinds", "cmp,lit,counter,errret", "mutation kinds")
	netns := flag.Bool("netns", true, "run the tests inside unshare -n with lo up")
	list := flag.Bool("list", false, "list the mutants, run nothing")
	files := flag.String("files", "", "only the files whose base name matches this regexp")
	match := flag.String("match", "", "of the sample, only the mutants whose printed line matches this regexp")
	uncovered := flag.Bool("uncovered", false, "list the mutants on lines no test executes, run only the tests on the original")
	pertest := flag.Bool("pertest", false, "run each test alone in the baseline, then each mutant with only the tests that execute its lines")
	cover := flag.Bool("cover", true, "run the tests on the original first, with a coverage profile; mutants on lines no test executes are survivors, not run")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mutate [flags] ./pkg ...")
		os.Exit(2)
	}
	root, err := moduleRoot()
	check(err)
	fileRE, err := regexp.Compile(*files)
	check(err)
	matchRE, err := regexp.Compile(*match)
	check(err)
	want := map[string]bool{}
	for _, k := range strings.Split(*kinds, ",") {
		want[strings.TrimSpace(k)] = true
	}

	if *uncovered || *pertest {
		*cover = true
	}
	var work string
	if !*list {
		work, err = os.MkdirTemp("", "mutate-")
		check(err)
		defer os.RemoveAll(work)
		check(copyModule(root, work))
	}

	type summary struct {
		pkg                       string
		killed, survived, noBuild int
		timedOut                  int // of killed
		notCovered                int // of survived
		survivors                 []mutant
	}
	var sums []summary
	for _, pkg := range flag.Args() {
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(pkg, "./")))
		ms, err := mutants(root, dir, fileRE, want)
		check(err)
		total := len(ms)
		if *n > 0 && len(ms) > *n {
			r := rand.New(rand.NewPCG(*seed, uint64(len(pkg))))
			r.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
			ms = ms[:*n]
			sort.Slice(ms, func(i, j int) bool {
				if ms[i].file != ms[j].file {
					return ms[i].file < ms[j].file
				}
				return ms[i].off < ms[j].off
			})
		}
		if *match != "" {
			var kept []mutant
			for _, m := range ms {
				if matchRE.MatchString(m.String()) {
					kept = append(kept, m)
				}
			}
			ms = kept
		}
		fmt.Printf("== %s: %d mutants, %d to run\n", pkg, total, len(ms))
		s := summary{pkg: pkg}
		var covered map[string]map[int]uint8
		var byTest *testCoverage
		if *cover && !*list && len(ms) > 0 {
			start := time.Now()
			if *pertest {
				byTest, err = baselinePerTest(work, pkg, *timeout, *run, *skip, *short, *netns)
				check(err)
				covered = byTest.lines
				fmt.Printf("   %d tests run alone on the original (%v)", len(byTest.names), time.Since(start).Round(100*time.Millisecond))
				if len(byTest.failed) > 0 {
					fmt.Printf("; %d fail alone, left out: %s", len(byTest.failed), strings.Join(byTest.failed, " "))
				}
				fmt.Println()
			} else {
				covered, err = baseline(work, pkg, *timeout, *run, *skip, *short, *netns)
				check(err)
				fmt.Printf("   tests pass on the original (%v); coverage profile read\n", time.Since(start).Round(100*time.Millisecond))
			}
		}
		for i, m := range ms {
			if *list {
				fmt.Println(m)
				continue
			}
			if *uncovered {
				if !m.covered(covered) {
					fmt.Println(m)
					s.notCovered++
				}
				continue
			}
			if covered != nil && !m.covered(covered) {
				s.survived++
				s.notCovered++
				s.survivors = append(s.survivors, m)
				fmt.Printf("[%d/%d] NOCOVER  %v\n", i+1, len(ms), m)
				continue
			}
			mrun := *run
			if byTest != nil {
				if sel := byTest.selection(m); sel != "" {
					mrun = sel
				}
			}
			start := time.Now()
			o, detail := runMutant(work, pkg, m, *timeout, mrun, *skip, *short, *netns)
			took := time.Since(start).Round(100 * time.Millisecond)
			switch o {
			case killed:
				s.killed++
				if strings.HasSuffix(detail, "timed out") { // ours, or go test -timeout
					s.timedOut++
				}
				fmt.Printf("[%d/%d] KILLED   %v (%v%s)\n", i+1, len(ms), m, took, detail)
			case survived:
				s.survived++
				s.survivors = append(s.survivors, m)
				fmt.Printf("[%d/%d] SURVIVED %v (%v)\n", i+1, len(ms), m, took)
			case noBuild:
				s.noBuild++
				fmt.Printf("[%d/%d] NOBUILD  %v\n", i+1, len(ms), m)
			}
		}
		sums = append(sums, s)
	}
	if *list {
		return
	}
	if *uncovered {
		for _, s := range sums {
			fmt.Printf("%-24s %d mutants on lines no test executes\n", s.pkg, s.notCovered)
		}
		return
	}
	fmt.Println("\n== efficacy (killed / (killed + survived); mutants that did not build left out)")
	for _, s := range sums {
		eff := "n/a"
		if k := s.killed + s.survived; k > 0 {
			eff = fmt.Sprintf("%.0f%%", 100*float64(s.killed)/float64(k))
		}
		fmt.Printf("%-24s killed %3d (%d timed out)  survived %3d (%d not covered)  not built %3d  efficacy %s\n", s.pkg, s.killed, s.timedOut, s.survived, s.notCovered, s.noBuild, eff)
		for _, m := range s.survivors {
			fmt.Printf("    survivor: %v\n", m)
		}
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module")
	}
	return filepath.Dir(mod), nil
}

// copyModule copies the module's files (not .git) from root to dst.
func copyModule(root, dst string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if d.Name() == ".git" || (rel != "." && strings.HasPrefix(d.Name(), ".") && d.Name() != ".ci") {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, info.Mode().Perm())
	})
}

// mutants lists the mutants of the non-test Go files of dir that the
// build (this GOOS/GOARCH, cgo as configured) compiles and whose base
// name files matches.
func mutants(root, dir string, files *regexp.Regexp, want map[string]bool) ([]mutant, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ms []mutant
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || !files.MatchString(name) {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, name); err != nil || !ok {
			continue
		}
		path := filepath.Join(dir, name)
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, path)
		fms, err := fileMutants(filepath.ToSlash(rel), src, want)
		if err != nil {
			return nil, err
		}
		ms = append(ms, fms...)
	}
	return ms, nil
}

var flips = map[token.Token]token.Token{
	token.LSS: token.LEQ, token.LEQ: token.LSS,
	token.GTR: token.GEQ, token.GEQ: token.GTR,
	token.EQL: token.NEQ, token.NEQ: token.EQL,
}

// negations are the cmpneg kind's changes, swaps the arith kind's (as
// gremlins' CONDITIONALS_NEGATION and ARITHMETIC_BASE).
var (
	negations = map[token.Token]token.Token{
		token.LSS: token.GEQ, token.LEQ: token.GTR,
		token.GTR: token.LEQ, token.GEQ: token.LSS,
	}
	swaps = map[token.Token]token.Token{
		token.ADD: token.SUB, token.SUB: token.ADD,
		token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.MUL,
	}
)

// fileMutants finds the mutation sites of one file.
func fileMutants(rel string, src []byte, want map[string]bool) ([]mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	for _, im := range f.Imports {
		if im.Path.Value == `"C"` {
			return nil, nil // cgo: left alone
		}
	}
	tf := fset.File(f.Pos())
	off := func(p token.Pos) int { return tf.Offset(p) }
	var ms []mutant
	var cases [][2]token.Pos // the expressions of every case clause
	add := func(kind string, from, to token.Pos, repl string) {
		o, e := off(from), off(to)
		in := false
		for _, c := range cases {
			in = in || from >= c[0] && from < c[1]
		}
		ms = append(ms, mutant{file: rel, line: tf.Line(from), endLine: tf.Line(to), kind: kind, off: o, end: e, orig: string(src[o:e]), repl: repl, inCase: in})
	}
	// Literals that size types or index constant tables are not
	// expressions a bug changes by one; skip array lengths.
	skip := map[ast.Node]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if at, ok := n.(*ast.ArrayType); ok && at.Len != nil {
			skip[at.Len] = true
		}
		if cc, ok := n.(*ast.CaseClause); ok && len(cc.List) > 0 {
			cases = append(cases, [2]token.Pos{cc.List[0].Pos(), cc.List[len(cc.List)-1].End()})
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		if skip[n] {
			return false
		}
		switch x := n.(type) {
		case *ast.GenDecl:
			if x.Tok == token.IMPORT {
				return false
			}
		case *ast.BinaryExpr:
			p, end := x.OpPos, x.OpPos+token.Pos(len(x.Op.String()))
			if to, ok := flips[x.Op]; ok && want["cmp"] {
				add("cmp", p, end, to.String())
			}
			if to, ok := negations[x.Op]; ok && want["cmpneg"] {
				add("cmpneg", p, end, to.String())
			}
			if to, ok := swaps[x.Op]; ok && want["arith"] && !isString(x.X) && !isString(x.Y) {
				add("arith", p, end, to.String())
			}
		case *ast.IncDecStmt:
			if want["incdec"] {
				to := token.DEC
				if x.Tok == token.DEC {
					to = token.INC
				}
				add("incdec", x.TokPos, x.TokPos+2, to.String())
			}
		case *ast.UnaryExpr:
			if x.Op == token.SUB && want["neg"] {
				add("neg", x.OpPos, x.OpPos+1, "+")
			}
		case *ast.BasicLit:
			if x.Kind == token.INT && want["lit"] {
				v, err := strconv.ParseUint(strings.ReplaceAll(x.Value, "_", ""), 0, 64)
				if err == nil {
					add("lit", x.Pos(), x.End(), strconv.FormatUint(v+1, 10))
					if v > 0 {
						add("lit", x.Pos(), x.End(), strconv.FormatUint(v-1, 10))
					}
				}
			}
		case *ast.BlockStmt:
			for _, st := range x.List {
				switch s := st.(type) {
				case *ast.ExprStmt:
					if want["counter"] && isCounterCall(s.X) {
						add("counter", s.Pos(), s.End(), "")
					}
				case *ast.IfStmt:
					if want["errret"] && isErrReturn(s) {
						// err stays used, so the mutant builds.
						add("errret", s.Pos(), s.End(), "_ = err")
					}
				}
			}
		}
		return true
	})
	return ms, nil
}

// isString: a string literal, or a sum with one (a concatenation, which
// no other arithmetic operator builds).
func isString(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.BasicLit:
		return x.Kind == token.STRING
	case *ast.BinaryExpr:
		return x.Op == token.ADD && (isString(x.X) || isString(x.Y))
	case *ast.ParenExpr:
		return isString(x.X)
	}
	return false
}

// isCounterCall: x.Add(...), x.Inc(), or atomic.Add*(...).
func isCounterCall(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	if id, ok := sel.X.(*ast.Ident); ok && id.Name == "atomic" {
		return strings.HasPrefix(sel.Sel.Name, "Add")
	}
	return sel.Sel.Name == "Add" && len(call.Args) == 1 || sel.Sel.Name == "Inc" && len(call.Args) == 0
}

// isErrReturn: `if err != nil { return ... }` with no init and no else.
func isErrReturn(s *ast.IfStmt) bool {
	if s.Init != nil || s.Else != nil || len(s.Body.List) != 1 {
		return false
	}
	if _, ok := s.Body.List[0].(*ast.ReturnStmt); !ok {
		return false
	}
	be, ok := s.Cond.(*ast.BinaryExpr)
	if !ok || be.Op != token.NEQ {
		return false
	}
	x, ok1 := be.X.(*ast.Ident)
	y, ok2 := be.Y.(*ast.Ident)
	return ok1 && ok2 && x.Name == "err" && y.Name == "nil"
}

// goTest builds the command for go test with args in work.
func goTest(ctx context.Context, work string, netns bool, args []string) *exec.Cmd {
	return testCommand(ctx, work, netns, "go", args)
}

// testCommand builds the command prog args, run in dir: in a private
// network namespace with lo up when netns, with RDMANET_TEST_NFT=1, in
// its own process group, killed at ctx's end.
func testCommand(ctx context.Context, dir string, netns bool, prog string, args []string) *exec.Cmd {
	var cmd *exec.Cmd
	if netns {
		script := `ip link set lo up && exec "$0" "$@"`
		cmd = exec.CommandContext(ctx, "unshare", append([]string{"-n", "sh", "-c", script, prog}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, prog, args...)
	}
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RDMANET_TEST_NFT=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

// testArgs are go test's arguments for pkg, -count=1 and -timeout, with
// extra before the package.
func testArgs(pkg string, timeout time.Duration, run, skip string, short bool, extra ...string) []string {
	args := append([]string{"test", "-count=1", "-timeout", timeout.String()}, extra...)
	if run != "" {
		args = append(args, "-run", run)
	}
	if skip != "" {
		args = append(args, "-skip", skip)
	}
	if short {
		args = append(args, "-short")
	}
	return append(args, pkg)
}

// Where a line stands in a coverage profile.
const (
	inBlock  = 1 // a statement of a block no test executed
	executed = 2 // of a block some test executed
)

// baseline runs pkg's tests on the unmutated copy with a coverage profile
// and returns, per file (relative to the module root), the lines of its
// blocks and whether a test executed them. Tests that fail on the
// original are an error: every kill would be false.
func baseline(work, pkg string, timeout time.Duration, run, skip string, short, netns bool) (map[string]map[int]uint8, error) {
	prof, err := os.CreateTemp("", "mutate-cover-")
	if err != nil {
		return nil, err
	}
	prof.Close()
	defer os.Remove(prof.Name())
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	cmd := goTest(ctx, work, netns, testArgs(pkg, timeout, run, skip, short, "-coverprofile", prof.Name()))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: the tests fail on the original code (%v): %s", pkg, err, firstFailure(out))
	}
	b, err := os.ReadFile(prof.Name())
	if err != nil {
		return nil, err
	}
	mod := exec.Command("go", "list", "-m")
	mod.Dir = work
	name, err := mod.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w", err)
	}
	return parseCover(b, strings.TrimSpace(string(name)))
}

// parseCover reads a coverage profile ("mode: ..." then lines
// "path/file.go:l0.c0,l1.c1 stmts count") into, per file relative to the
// module mod, the lines of its blocks: executed where a block with a count
// above 0 holds the line, inBlock where only blocks never executed do.
// Lines outside every block (declarations, constants) are absent.
func parseCover(b []byte, mod string) (map[string]map[int]uint8, error) {
	lines := map[string]map[int]uint8{}
	for i, l := range strings.Split(string(b), "\n") {
		if i == 0 || l == "" {
			continue
		}
		colon := strings.LastIndex(l, ".go:")
		if colon < 0 {
			return nil, fmt.Errorf("coverage profile line %d: %q", i+1, l)
		}
		var l0, c0, l1, c1, stmts, count int
		if _, err := fmt.Sscanf(l[colon+4:], "%d.%d,%d.%d %d %d", &l0, &c0, &l1, &c1, &stmts, &count); err != nil {
			return nil, fmt.Errorf("coverage profile line %d: %q: %v", i+1, l, err)
		}
		rel := strings.TrimPrefix(l[:colon+3], mod+"/")
		if lines[rel] == nil {
			lines[rel] = map[int]uint8{}
		}
		st := uint8(inBlock)
		if count > 0 {
			st = executed
		}
		for n := l0; n <= l1; n++ {
			lines[rel][n] = max(lines[rel][n], st)
		}
	}
	return lines, nil
}

// testCoverage is the baseline of -pertest: each test's executed lines.
type testCoverage struct {
	lines  map[string]map[int]uint8 // all tests together, as parseCover
	names  []string                 // the tests that pass alone
	by     map[string]map[int][]int // file, line: indexes into names
	failed []string                 // tests that fail alone on the original
}

// baselinePerTest builds pkg's test binary with coverage in work, lists
// its tests (those run matches; no benchmarks) and runs each alone with
// its own profile, in the package's directory as go test does.
func baselinePerTest(work, pkg string, timeout time.Duration, run, skip string, short, netns bool) (*testCoverage, error) {
	tmp, err := os.MkdirTemp("", "mutate-pertest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "pkg.test")
	build := exec.Command("go", "test", "-c", "-cover", "-o", bin, pkg)
	build.Dir = work
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: go test -c: %v: %s", pkg, err, out)
	}
	mod := exec.Command("go", "list", "-m")
	mod.Dir = work
	name, err := mod.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w", err)
	}
	modPath := strings.TrimSpace(string(name))
	dir := filepath.Join(work, filepath.FromSlash(strings.TrimPrefix(pkg, "./")))
	exe := func(ctx context.Context, args ...string) *exec.Cmd {
		return testCommand(ctx, dir, netns, bin, args)
	}
	listRE := run
	if listRE == "" {
		listRE = "."
	}
	out, err := exe(context.Background(), "-test.list", listRE).Output()
	if err != nil {
		return nil, fmt.Errorf("%s: -test.list: %v", pkg, err)
	}
	tc := &testCoverage{lines: map[string]map[int]uint8{}, by: map[string]map[int][]int{}}
	prof := filepath.Join(tmp, "cover.out")
	for _, t := range strings.Fields(string(out)) {
		if strings.HasPrefix(t, "Benchmark") {
			continue
		}
		// A counter directory of its own: a test that re-executes the
		// binary (in a namespace: testenv.InOwnNetns) passes it to the
		// child, whose lines then count; without one the child has none
		// and its lines are credited to no test.
		covdir := filepath.Join(tmp, "covdata")
		os.RemoveAll(covdir)
		if err := os.Mkdir(covdir, 0o755); err != nil {
			return nil, err
		}
		args := []string{"-test.run", "^" + regexp.QuoteMeta(t) + "$", "-test.count=1", "-test.timeout", timeout.String(), "-test.coverprofile", prof, "-test.gocoverdir", covdir}
		if skip != "" {
			args = append(args, "-test.skip", skip)
		}
		if short {
			args = append(args, "-test.short")
		}
		os.Remove(prof)
		ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
		err := exe(ctx, args...).Run()
		cancel()
		if err != nil {
			tc.failed = append(tc.failed, t)
			continue
		}
		b, err := os.ReadFile(prof)
		if err != nil {
			return nil, fmt.Errorf("%s: %s's profile: %v", pkg, t, err)
		}
		lines, err := parseCover(b, modPath)
		if err != nil {
			return nil, err
		}
		idx := len(tc.names)
		tc.names = append(tc.names, t)
		for file, ls := range lines {
			if tc.lines[file] == nil {
				tc.lines[file] = map[int]uint8{}
				tc.by[file] = map[int][]int{}
			}
			for n, st := range ls {
				tc.lines[file][n] = max(tc.lines[file][n], st)
				if st == executed {
					tc.by[file][n] = append(tc.by[file][n], idx)
				}
			}
		}
	}
	if len(tc.names) == 0 {
		return nil, fmt.Errorf("%s: no test passes alone on the original code (failed: %v)", pkg, tc.failed)
	}
	return tc, nil
}

// selection is the go test -run regexp of the tests that execute m's
// lines (as covered reads them), or "" for every test: one of its lines
// is outside every block, so any test may use it, or m changes a case
// clause's expression (inCase), whose line's block is a clause's body:
// the tests that evaluate the expression and do not take the clause are
// not among those of the block.
func (tc *testCoverage) selection(m mutant) string {
	if m.inCase {
		return ""
	}
	from, to := m.lines()
	set := map[int]bool{}
	for n := from; n <= to; n++ {
		if tc.lines[m.file][n] == 0 {
			return ""
		}
		for _, i := range tc.by[m.file][n] {
			set[i] = true
		}
	}
	if len(set) == 0 {
		return "" // not covered: the caller does not run it
	}
	names := make([]string, 0, len(set))
	for i := range set {
		names = append(names, regexp.QuoteMeta(tc.names[i]))
	}
	sort.Strings(names)
	return "^(" + strings.Join(names, "|") + ")$"
}

// lines are the lines whose execution makes m visible: the lines it
// spans, or for a dropped error return the return inside it (the
// condition is evaluated whenever the if is reached).
func (m mutant) lines() (from, to int) {
	from, to = m.line, max(m.line, m.endLine)
	if m.kind == "errret" && to > from {
		from++
	}
	return from, to
}

// covered reports whether a test may execute what m changes: false only
// when its lines are all statements of blocks no test executed (for a
// dropped error return, the lines of the return inside it: the condition
// is evaluated whenever the if is reached, and only an executed return
// makes the drop visible). A line outside every block, such as a
// constant's, may be used by executed code: covered; so is a case
// clause's expression (inCase).
func (m mutant) covered(lines map[string]map[int]uint8) bool {
	if m.inCase {
		return true
	}
	from, to := m.lines()
	for n := from; n <= to; n++ {
		if lines[m.file][n] != inBlock {
			return true
		}
	}
	return false
}

// runMutant applies m to the copy in work, runs pkg's tests there and
// puts the file back.
func runMutant(work, pkg string, m mutant, timeout time.Duration, run, skip string, short, netns bool) (outcome, string) {
	path := filepath.Join(work, filepath.FromSlash(m.file))
	orig, err := os.ReadFile(path)
	check(err)
	mut := append(append(append([]byte{}, orig[:m.off]...), m.repl...), orig[m.end:]...)
	check(os.WriteFile(path, mut, 0o644))
	defer func() { check(os.WriteFile(path, orig, 0o644)) }()

	// Compile first: a mutant that does not build says nothing of the tests.
	vet := exec.Command("go", "test", "-count=1", "-run", "^$", pkg)
	vet.Dir = work
	if out, err := vet.CombinedOutput(); err != nil {
		if bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")) {
			return noBuild, ""
		}
	}

	// The outer bound: go test's own -timeout panics the binary a little
	// after timeout; this kills what is left.
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	cmd := goTest(ctx, work, netns, testArgs(pkg, timeout, run, skip, short, "-failfast"))
	out, err := cmd.CombinedOutput()
	if err == nil {
		return survived, ""
	}
	if ctx.Err() != nil {
		return killed, timedOutDetail
	}
	return killed, ", " + firstFailure(out)
}

// timedOutDetail marks a kill by the outer timeout: on a loaded machine
// that may be load, not the mutant; rerun such ones with -match.
const timedOutDetail = ", timed out"

// firstFailure names the first failing test in go test's output.
func firstFailure(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "--- FAIL:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "--- FAIL:"))
		}
		if strings.HasPrefix(l, "panic: test timed out") {
			return "test timed out"
		}
	}
	return "failed"
}
