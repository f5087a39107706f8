//go:build linux

package main

import (
	"fmt"
	"slices"
	"testing"
)

func TestParseCoverKeepsExecutedLines(t *testing.T) {
	prof := "mode: set\n" +
		"example.com/m/pkg/a.go:3.10,5.2 2 1\n" +
		"example.com/m/pkg/a.go:7.2,9.3 1 0\n" +
		"example.com/m/pkg/b.go:1.1,1.20 1 4\n"
	lines, err := parseCover([]byte(prof), "example.com/m")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		line int
		want uint8
	}{
		{"pkg/a.go", 3, executed}, {"pkg/a.go", 4, executed}, {"pkg/a.go", 5, executed},
		{"pkg/a.go", 6, 0}, {"pkg/a.go", 7, inBlock}, {"pkg/a.go", 9, inBlock},
		{"pkg/b.go", 1, executed}, {"pkg/b.go", 2, 0},
	} {
		if got := lines[c.file][c.line]; got != c.want {
			t.Errorf("%s:%d = %d, want %d", c.file, c.line, got, c.want)
		}
	}
	if _, err := parseCover([]byte("mode: set\nno position here\n"), "example.com/m"); err == nil {
		t.Error("a line without a position parsed")
	}
}

func TestCoveredLooksAtTheErrorReturn(t *testing.T) {
	src := []byte(`package p

func f() error {
	err := g()
	if err != nil {
		return err
	}
	return nil
}

func g() error { return nil }
`)
	ms, err := fileMutants("pkg/p.go", src, map[string]bool{"errret": true, "cmp": true})
	if err != nil {
		t.Fatal(err)
	}
	var errret, cmp *mutant
	for i := range ms {
		switch ms[i].kind {
		case "errret":
			errret = &ms[i]
		case "cmp":
			cmp = &ms[i]
		}
	}
	if errret == nil || cmp == nil {
		t.Fatalf("mutants %v: want an errret and a cmp", ms)
	}
	if errret.line != 5 || errret.endLine != 7 || cmp.line != 5 || cmp.endLine != 5 {
		t.Fatalf("errret lines %d-%d, cmp %d-%d; want 5-7 and 5-5", errret.line, errret.endLine, cmp.line, cmp.endLine)
	}
	// The if is reached, its return is not: the comparison's mutant runs,
	// the dropped return cannot change what any test sees.
	reached := map[string]map[int]uint8{"pkg/p.go": {3: executed, 4: executed, 5: executed, 6: inBlock, 7: inBlock, 8: executed}}
	if !cmp.covered(reached) {
		t.Error("cmp on an executed line: not covered")
	}
	if errret.covered(reached) {
		t.Error("errret whose return no test reaches: covered")
	}
	reached["pkg/p.go"][6] = executed
	if !errret.covered(reached) {
		t.Error("errret whose return runs: not covered")
	}
	if cmp.covered(map[string]map[int]uint8{"pkg/p.go": {5: inBlock}}) {
		t.Error("cmp on a line no test executes: covered")
	}
	// A constant's line is in no block: code that uses it may run.
	if !cmp.covered(map[string]map[int]uint8{"pkg/other.go": {5: inBlock}}) {
		t.Error("a line in no block of the file: not covered")
	}
}

// A case clause's expression lies in the block of the clause before it
// as go test -cover counts blocks (or in none), so that block's count says
// nothing of whether it was evaluated: such a mutant always runs. A
// comparison in a clause's body is judged by its line as before.
func TestCaseExpressionsRun(t *testing.T) {
	src := []byte(`package p

func f(a, b int) int {
	switch {
	case a > 1:
		return 1
	case b > 2:
		return b > 3
	}
	return 0
}
`)
	ms, err := fileMutants("pkg/p.go", src, map[string]bool{"cmp": true})
	if err != nil {
		t.Fatal(err)
	}
	in := map[int]bool{}
	for _, m := range ms {
		in[m.line] = m.inCase
	}
	if want := map[int]bool{5: true, 7: true, 8: false}; len(in) != len(want) || in[5] != want[5] || in[7] != want[7] || in[8] != want[8] {
		t.Fatalf("got inCase by line %v, want %v", in, want)
	}
	// The second clause's line counted in the first clause's body, which
	// no test ran.
	unrun := map[string]map[int]uint8{"pkg/p.go": {5: executed, 6: inBlock, 7: inBlock, 8: inBlock}}
	for _, m := range ms {
		if got, want := m.covered(unrun), m.line != 8; got != want {
			t.Errorf("%v: covered %v, want %v", m, got, want)
		}
	}
}

// A mutant runs the tests that execute its lines, all tests for a line
// in no block or a case clause's expression, none when no test executes
// it.
func TestSelectionNamesTheTestsOfItsLines(t *testing.T) {
	tc := &testCoverage{
		names: []string{"TestA", "TestB", "TestC"},
		lines: map[string]map[int]uint8{"pkg/p.go": {5: executed, 6: executed, 7: inBlock}},
		by:    map[string]map[int][]int{"pkg/p.go": {5: {0, 2}, 6: {1}}},
	}
	for _, c := range []struct {
		m    mutant
		want string
	}{
		{mutant{file: "pkg/p.go", line: 5, endLine: 5, kind: "cmp"}, "^(TestA|TestC)$"},
		{mutant{file: "pkg/p.go", line: 5, endLine: 6, kind: "lit"}, "^(TestA|TestB|TestC)$"},
		{mutant{file: "pkg/p.go", line: 5, endLine: 6, kind: "errret"}, "^(TestB)$"}, // the return's line only
		{mutant{file: "pkg/p.go", line: 7, endLine: 7, kind: "cmp"}, ""},             // not covered
		{mutant{file: "pkg/p.go", line: 9, endLine: 9, kind: "lit"}, ""},             // a constant: every test
		// A case clause's expression on line 6, whose block is its
		// clause's body: a test that evaluates it and takes another
		// clause is not TestB, so every test runs.
		{mutant{file: "pkg/p.go", line: 6, endLine: 6, kind: "cmp", inCase: true}, ""},
	} {
		if got := tc.selection(c.m); got != c.want {
			t.Errorf("%s:%d-%d %s: selection %q, want %q", c.m.file, c.m.line, c.m.endLine, c.m.kind, got, c.want)
		}
	}
}

// The kinds outside the default set: each makes its one change, at the
// operator.
func TestOtherKinds(t *testing.T) {
	src := []byte(`package p

func f(a, b int) int {
	if a < b {
		a++
	}
	b--
	return -a + b*2 + len("x"+"y"+s())
}
`)
	ms, err := fileMutants("pkg/p.go", src, map[string]bool{"cmpneg": true, "arith": true, "incdec": true, "neg": true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%d %s %s>%s", m.line, m.kind, m.orig, m.repl))
	}
	// In the order ast.Inspect meets them: the sum before its operands.
	// A concatenation is left alone (it would not build).
	want := []string{"4 cmpneg <>>=", "5 incdec ++>--", "7 incdec -->++", "8 arith +>-", "8 arith +>-", "8 neg ->+", "8 arith *>/"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
