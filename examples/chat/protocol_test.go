package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func encode(t testing.TB, p Packet) []byte {
	t.Helper()
	b, err := p.Append(nil)
	require.NoError(t, err)
	return b
}

func TestPacketRoundTrip(t *testing.T) {
	for _, p := range []Packet{
		{Type: Hello, Session: 1, Seq: 0, Interval: 2000, Nick: "alice"},
		{Type: Msg, Session: 0xDEADBEEFCAFEF00D, Seq: 7, Interval: 100, Nick: "bob", Text: "hello, wörld"},
		{Type: Msg, Session: 2, Seq: 1<<32 - 1, Nick: strings.Repeat("n", maxNick), Text: ""},
		{Type: Heartbeat, Session: 3, Seq: 42, Interval: 65535, Nick: "ça"},
		{Type: Bye, Session: 4, Seq: 9, Nick: "x"},
	} {
		b := encode(t, p)
		require.Len(t, b, headerLen(p.Nick)+len(p.Text))
		got, err := Decode(b)
		require.NoError(t, err, "%+v", p)
		assert.Equal(t, p, got)
	}
}

func TestPacketLayout(t *testing.T) {
	b := encode(t, Packet{Type: Msg, Session: 0x0102030405060708, Seq: 0x0A0B0C0D, Interval: 0x0E0F, Nick: "al", Text: "hi"})
	want := []byte{'R', 'C', 1, 2, 1, 2, 3, 4, 5, 6, 7, 8, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 2, 'a', 'l', 0, 2, 'h', 'i'}
	assert.Equal(t, want, b)
}

func TestAppendRefusesWhatDecodeRejects(t *testing.T) {
	for name, p := range map[string]Packet{
		"type 0":         {Type: 0, Session: 1, Nick: "a"},
		"type 5":         {Type: 5, Session: 1, Nick: "a"},
		"session 0":      {Type: Msg, Nick: "a"},
		"empty nick":     {Type: Msg, Session: 1},
		"long nick":      {Type: Msg, Session: 1, Nick: strings.Repeat("n", maxNick+1)},
		"space in nick":  {Type: Msg, Session: 1, Nick: "a b"},
		"escape in nick": {Type: Msg, Session: 1, Nick: "a\x1b[2J"},
		"bad UTF-8 text": {Type: Msg, Session: 1, Nick: "a", Text: "\xff"},
		"text on hello":  {Type: Hello, Session: 1, Nick: "a", Text: "x"},
		"huge text":      {Type: Msg, Session: 1, Nick: "a", Text: strings.Repeat("x", 1<<16)},
	} {
		_, err := p.Append(nil)
		assert.Error(t, err, name)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := encode(t, Packet{Type: Msg, Session: 1, Seq: 1, Nick: "bob", Text: "hey"})
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"empty":          {nil, ErrShort},
		"3 bytes":        {good[:3], ErrShort},
		"no magic":       {mod(func(b []byte) []byte { b[0] = 'X'; return b }), ErrMagic},
		"version 2":      {mod(func(b []byte) []byte { b[2] = 2; return b }), ErrVersion},
		"type 9":         {mod(func(b []byte) []byte { b[3] = 9; return b }), ErrType},
		"short header":   {good[:fixedHeader-1], ErrShort},
		"cut in nick":    {good[:fixedHeader+2], ErrShort},
		"cut in length":  {good[:fixedHeader+4], ErrShort},
		"cut in text":    {good[:len(good)-1], ErrMalformed},
		"trailing byte":  {append(bytes.Clone(good), 0), ErrMalformed},
		"session 0":      {mod(func(b []byte) []byte { copy(b[4:12], make([]byte, 8)); return b }), ErrMalformed},
		"nick length 0":  {mod(func(b []byte) []byte { b[18] = 0; return b }), ErrMalformed},
		"nick control":   {mod(func(b []byte) []byte { b[19] = '\n'; return b }), ErrMalformed},
		"heartbeat text": {mod(func(b []byte) []byte { b[3] = byte(Heartbeat); return b }), ErrMalformed},
		"text not UTF-8": {mod(func(b []byte) []byte { b[len(b)-1] = 0xff; return b }), ErrMalformed},
	} {
		_, err := Decode(tc.b)
		assert.ErrorIs(t, err, tc.want, name)
	}
}

func TestMaxText(t *testing.T) {
	assert.Equal(t, 1024-21-5, MaxText(1024, "alice"))
	assert.Equal(t, 0, MaxText(10, "alice"))
	assert.Equal(t, 0xFFFF, MaxText(1<<20, "a"))
	// The longest text fits the MTU exactly.
	p := Packet{Type: Msg, Session: 1, Nick: "alice", Text: strings.Repeat("x", MaxText(1024, "alice"))}
	assert.Len(t, encode(t, p), 1024)
}

// FuzzDecode: Decode never panics or reads out of bounds, and whatever it
// accepts encodes back to the same bytes (one encoding per packet).
func FuzzDecode(f *testing.F) {
	for _, p := range []Packet{
		{Type: Hello, Session: 1, Interval: 2000, Nick: "alice"},
		{Type: Msg, Session: 2, Seq: 3, Nick: "bob", Text: "hello"},
		{Type: Heartbeat, Session: 3, Seq: 4, Nick: "ça"},
		{Type: Bye, Session: 4, Nick: "x"},
	} {
		b, _ := p.Append(nil)
		f.Add(b)
	}
	f.Add([]byte("RC\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			return
		}
		again, err := p.Append(nil)
		if err != nil {
			t.Fatalf("decoded %+v from %x but cannot encode it: %v", p, b, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decode/encode changed %x into %x", b, again)
		}
	})
}
