package upstream

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

type nopSink struct{ end *StreamEnd }

func (nopSink) Write([]byte)       {}
func (s *nopSink) End(e StreamEnd) { s.end = &e }

// judge runs a line through streamLine in pieces of step bytes.
func judge(line []byte, step int, cut bool) bool {
	sink := &nopSink{}
	s := &streamLine{p: &Process{log: slog.New(slog.NewTextHandler(io.Discard, nil))}, sink: sink}
	for i := 0; i < len(line); i += step {
		s.Write(line[i:min(i+step, len(line))])
	}
	s.End(framing.LineEnd{Size: int64(len(line)), Cut: cut, Peek: &jsonlex.Peek{}})
	return sink.end.OK
}

// FuzzStreamJudgedAsWhole: a streamed line is judged a message exactly when the
// whole line would be (IsMessage; a cut one only when it is also valid), whatever
// the pieces it came in.
func FuzzStreamJudgedAsWhole(f *testing.F) {
	for _, s := range []string{`{"id":1,"result":{}}`, ` [1] `, `[INFO] ready]`, `{"a":tru}`, `{}`, `[]`, `{"id":1}x`, "\t{\"a\":1}\r", `{`, `"x"`} {
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, line []byte, step int) {
		for _, c := range line {
			if c == '\n' {
				return // a line has none
			}
		}
		step = 1 + int(uint(step)%13)
		if got, want := judge(line, step, false), IsMessage(line); got != want {
			t.Fatalf("streamed in pieces of %d: %v, whole: %v, for %q", step, got, want, line)
		}
		if got, want := judge(line, step, true), jsonlex.Valid(line) && IsMessage(line); got != want {
			t.Fatalf("cut, streamed in pieces of %d: %v, whole: %v, for %q", step, got, want, line)
		}
	})
}

// TestStreamJudgesLongLinesByTheirShape: past smallLine a streamed line is judged by
// its ends and first token, as a whole one is.
func TestStreamJudgesLongLinesByTheirShape(t *testing.T) {
	pad := make([]byte, smallLine+10)
	for i := range pad {
		pad[i] = 'x'
	}
	for _, c := range []struct {
		line string
		want bool
	}{
		{`{"t":"` + string(pad) + `"}`, true},
		{`{"t":"` + string(pad) + `"`, false},
		{`[INFO` + string(pad) + `]`, false},
		{`[ "` + string(pad) + `"]`, true},
		{`{"t":tru` + string(pad) + `"}`, true}, // broken inside: judged by its ends, as whole
	} {
		if got := judge([]byte(c.line), 65536, false); got != c.want || got != IsMessage([]byte(c.line)) {
			t.Fatalf("%.20s…: streamed %v, want %v (IsMessage %v)", c.line, got, c.want, IsMessage([]byte(c.line)))
		}
	}
}

// TestStreamCutLongLineJudgedByItsStructure: a line over smallLine that the stream's
// end cut is a message when its object closed with nothing after it (read whole it
// would be validated in full, and a server's valid last answer without a newline
// reaches the host); cut inside, or with something after, it is not.
func TestStreamCutLongLineJudgedByItsStructure(t *testing.T) {
	body := `{"id":1,"result":{"text":"` + strings.Repeat("x", smallLine) + `"}}`
	for _, c := range []struct {
		line string
		want bool
	}{
		{body, true},
		{body[:len(body)-1], false},             // the object still open
		{body[:len(body)-3] + `}}`, false},      // cut inside the string, after a "}"
		{body + ` {"id":2,"result":{}}`, false}, // a second value
		{body + " \t", true},                    // whitespace after it
		{`{"id":1,"result":[` + strings.Repeat("1,", smallLine) + `1]`, false}, // open
	} {
		var pk jsonlex.Peek
		pk.Write([]byte(c.line))
		sink := &nopSink{}
		s := &streamLine{p: &Process{log: slog.New(slog.NewTextHandler(io.Discard, nil))}, sink: sink}
		s.Write([]byte(c.line))
		s.End(framing.LineEnd{Size: int64(len(c.line)), Cut: true, Peek: &pk})
		if sink.end.OK != c.want {
			t.Errorf("cut line of %d bytes ending %q: judged a message %v, want %v", len(c.line), c.line[len(c.line)-8:], sink.end.OK, c.want)
		}
	}
}

// TestStreamJudgesAPaddedLineByItsTrimmedSize: IsMessage validates a line whose
// trimmed size is up to smallLine, however much blank is around it; a streamed line
// is judged the same, not by its size with the blanks.
func TestStreamJudgesAPaddedLineByItsTrimmedSize(t *testing.T) {
	pad := strings.Repeat(" ", smallLine)
	for _, line := range []string{
		pad + `{"id":1,"result":{"a":tru}}`,        // invalid, with the right ends
		`{"id":1,"result":{"a":tru}}` + pad,        // the same, padded after
		pad + `{"id":1,"result":{"a":true}}` + pad, // valid
		pad + `{"id":1,"result":"` + strings.Repeat("x", smallLine) + `"}`,
	} {
		for _, step := range []int{1 << 16, 7777} {
			if got, want := judge([]byte(line), step, false), IsMessage([]byte(line)); got != want {
				t.Errorf("a %d-byte line, %q trimmed, in pieces of %d: streamed %v, whole %v", len(line), strings.TrimSpace(line)[:20], step, got, want)
			}
		}
	}
}

// TestStreamEndSaysAnError: a streamed answer's end says it was an error when its
// head said so (the relay's stand-in of it for interception is then an error's).
func TestStreamEndSaysAnError(t *testing.T) {
	for _, line := range []string{`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}`, `{"jsonrpc":"2.0","id":1,"result":{}}`} {
		sink := &nopSink{}
		s := &streamLine{p: &Process{log: slog.New(slog.NewTextHandler(io.Discard, nil))}, sink: sink}
		var pk jsonlex.Peek
		pk.Write([]byte(line))
		s.Write([]byte(line))
		s.End(framing.LineEnd{Size: int64(len(line)), Peek: &pk})
		if want := strings.Contains(line, "error"); !sink.end.OK || sink.end.Error != want {
			t.Fatalf("%s: OK %v Error %v", line, sink.end.OK, sink.end.Error)
		}
	}
}

// FuzzStreamJudgedOfferedAsWhole: a line offered whole (framing.Reader.Offered) and
// judged a message by IsMessage there streams with judged set: its end must judge it
// exactly as the whole line is, blanks, a CR and a size at smallLine included.
func FuzzStreamJudgedOfferedAsWhole(f *testing.F) {
	pad := strings.Repeat("x", smallLine-8)
	for _, s := range []string{`{"id":1,"result":{}}`, " \t{\"a\":1}\r", `{"t":"` + pad + `"}`, ` {"t":"` + pad + `x"} `, `{"t":"` + pad + `xy"}`, "\r\r{\"t\":\"" + pad + "\"}\r\r"} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, line []byte, step int) {
		if bytes.IndexByte(line, '\n') >= 0 || !IsMessage(line) {
			return // offered, and no message: not streamed at all
		}
		step = 1 + int(uint(step)%13)
		sink := &nopSink{}
		s := &streamLine{p: &Process{log: slog.New(slog.NewTextHandler(io.Discard, nil))}, sink: sink, judged: true}
		for i := 0; i < len(line); i += step {
			s.Write(line[i:min(i+step, len(line))])
		}
		s.End(framing.LineEnd{Size: int64(len(line)), Peek: &jsonlex.Peek{}})
		if !sink.end.OK || sink.end.OK != judge(line, step, false) {
			t.Fatalf("judged, streamed in pieces of %d: %v, validated as it passed: %v, for %q", step, sink.end.OK, judge(line, step, false), line)
		}
	})
}
