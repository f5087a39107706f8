package main

import (
	"bytes"
	"io"
	"strings"
	"text/tabwriter"
)

// table aligns tab-separated columns like text/tabwriter, without the
// trailing spaces an empty last column would leave.
type table struct {
	out io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable(out io.Writer) *table {
	t := &table{out: out}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 4, 2, ' ', 0)
	return t
}

func (t *table) Write(p []byte) (int, error) { return t.tw.Write(p) }

// Flush writes the aligned rows out.
func (t *table) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	lines := strings.SplitAfter(t.buf.String(), "\n")
	t.buf.Reset()
	var b strings.Builder
	for _, l := range lines {
		nl := strings.HasSuffix(l, "\n")
		b.WriteString(strings.TrimRight(l, " \n"))
		if nl {
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(t.out, b.String())
	return err
}
