// Package callcmd is `bir-proxy call`: one tools/call (or a script of them, or the
// tool list) made on a server from a terminal or a script, its answer printed, and
// recorded as any call is (the journal or recorder, and a cassette with --cassette).
// The server is reached as verify reaches it (verify.Connect): the same start, the
// same handshake.
package callcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jcs"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/upstream"
	"github.com/bir-dev/bir-proxy/verify"
)

// Usage is the command's synopsis.
const Usage = "[flags] TOOL [key=value...] -- COMMAND [ARGS...]  |  call --list ...  |  call --script FILE ...  (--url URL or --entry NAME instead of -- COMMAND)"

// About is the paragraph under its usage line.
const About = `Calls TOOL on the MCP server started by COMMAND (or at --url, or the host's
entry NAME) and prints the result: text content as text, other content as JSON;
--json prints the result object as the server sent it. Arguments are --args
(a JSON object) with each key=value on top: a value that is a JSON number,
boolean or object is that, anything else a string. --list prints the tool
names; --script runs a JSON or YAML list of steps, {"tool":..., "arguments":
{...}} or {"list_tools":true}, every one. Each call is recorded as the proxy records
one (the journal, or the recorder), and with --cassette in a cassette that
bir-proxy verify reads.
Exit status: 0 ok, 1 a result with isError or a JSON-RPC error (any step of a
script), 2 bad usage, 3 the server could not be started or stopped answering.`

// Options are the command's: what it was asked, how the server is reached, where
// calls are recorded and where it prints.
type Options struct {
	Stdout, Stderr io.Writer
	Logger         *slog.Logger

	// Dial starts or connects to the server; IDPrefix starts the ids of the requests.
	Dial     func(ctx context.Context) (upstream.Conn, error)
	IDPrefix string
	Timeout  time.Duration // per request (0: verify.DefaultCallTimeout)

	// What to do: Steps (from a tool and its arguments, --list or --script).
	Steps []Step
	JSON  bool

	// Report, when set, records each call as the proxy would (the journal or recorder).
	Report func(report.Step)
	// Cassette, when set, is the cassette to record to, Header its server and command
	// (redacted by the caller).
	Cassette string
	Header   cassette.Header
}

// Exit statuses.
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitUsage       = 2
	ExitUnreachable = 3
)

// clientInit is the initialize the command sends (a recorded one when replayed by
// verify: its cassette's header keeps it); clientMeta is the params._meta of its
// requests to a server of the stateless era alone (2026-07-28), which refuses it.
var (
	clientInit = []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bir-proxy call","version":"1"}}`)
	clientMeta = []byte(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bir-proxy call","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`)
)

// Run runs the steps; it returns the exit status.
func Run(ctx context.Context, o Options) int {
	if o.Timeout <= 0 {
		o.Timeout = verify.DefaultCallTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(o.Stderr, "bir-proxy call: %s\n", termtext.Line(err.Error()))
		return code
	}
	client, h, err := verify.Connect(ctx, o.Dial, o.IDPrefix, o.Timeout, clientInit, clientMeta)
	if err != nil {
		return fail(ExitUnreachable, err)
	}
	defer client.Close()

	var cw *cassette.Writer
	if o.Cassette != "" {
		if cw, err = cassette.Create(cassette.WriterOptions{Path: o.Cassette, Header: o.Header, Logger: o.Logger}); err != nil {
			return fail(ExitUsage, fmt.Errorf("--cassette %s: %w", o.Cassette, err))
		}
		defer func() {
			if err := cw.Close(); err != nil {
				fail(ExitFailed, err)
			}
		}()
		// The handshake as a host's is recorded: what verify makes again.
		if h.Era == cassette.EraStateless {
			cw.HostRequest("server/discover", append(append([]byte(`{"_meta":`), h.Meta...), '}'))
			cw.ServerResult("server/discover", h.DiscoverResult)
		} else {
			cw.HostRequest("initialize", h.Initialize)
			cw.ServerResult("initialize", h.InitializeResult)
			cw.HostRequest("notifications/initialized", nil)
		}
		// The tools in the header: verify decides what it may replay by their
		// annotations.
		all, cut, err := client.ListTools(ctx)
		if err != nil {
			return fail(exitFor(err), err)
		}
		if cut != "" {
			o.Logger.Warn(cut)
		}
		cw.ServerResult("tools/list", append(append([]byte(`{"tools":`), orEmpty(all)...), '}'))
	}

	status := ExitOK
	for i, st := range o.Steps {
		label := ""
		if len(o.Steps) > 1 {
			label = "step " + strconv.Itoa(i+1) + ": "
		}
		if st.ListTools {
			all, cut, err := client.ListTools(ctx)
			if err != nil {
				return fail(exitFor(err), errors.New(label+err.Error()))
			}
			if cut != "" {
				o.Logger.Warn(cut)
			}
			printTools(o.Stdout, all, o.JSON)
			continue
		}
		started := time.Now()
		a, err := client.Call(ctx, o.Timeout, st.Tool, st.Arguments)
		ended := time.Now()
		if err != nil {
			if exitFor(err) == ExitUnreachable {
				// The call is recorded as the proxy records a call whose server went.
				record(&o, cw, st, verify.Answer{}, report.OutcomeUpstreamLost, started, ended)
				return fail(ExitUnreachable, fmt.Errorf("%s%s: %w", label, st.Tool, err))
			}
			record(&o, cw, st, verify.Answer{}, report.OutcomeTimeout, started, ended)
			fail(ExitFailed, fmt.Errorf("%s%s: %w", label, st.Tool, err))
			status = ExitFailed
			continue
		}
		outcome := Outcome(a)
		record(&o, cw, st, a, outcome, started, ended)
		switch outcome {
		case report.OutcomeRPCError:
			fmt.Fprintf(o.Stderr, "bir-proxy call: %s%s: the server answered with an error: %s\n", label, termtext.Line(st.Tool), termtext.Line(string(a.Error)))
			status = ExitFailed
			if o.JSON {
				printJSON(o.Stdout, a.Error)
			}
			continue
		case report.OutcomeToolError:
			fmt.Fprintf(o.Stderr, "bir-proxy call: %s%s: the tool failed (isError: true)\n", label, termtext.Line(st.Tool))
			status = ExitFailed
		}
		if o.JSON {
			printJSON(o.Stdout, a.Result)
		} else {
			printResult(o.Stdout, a.Result)
		}
	}
	return status
}

// exitFor is the exit status of a failed request.
func exitFor(err error) int {
	var un *verify.UnreachableError
	if errors.As(err, &un) {
		return ExitUnreachable
	}
	return ExitFailed
}

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte("[]")
	}
	return b
}

// Outcome is an answer's, as a step report says it.
func Outcome(a verify.Answer) string {
	switch {
	case a.Error != nil:
		return report.OutcomeRPCError
	case string(jsonlex.Get(a.Result, "isError")) == "true":
		return report.OutcomeToolError
	case jsonlex.StringOf(jsonlex.Get(a.Result, "resultType")) == "input_required":
		return report.OutcomeInputRequired
	}
	return report.OutcomeOK
}

// Bounds of a report's parts, as the proxy's reports (intercept.DefaultReportCap, 64 KiB).
const (
	reportArgs   = 24 << 10
	reportResult = 32 << 10
	reportError  = 4 << 10
)

// record records one call: a step report (the journal or recorder), and the cassette.
func record(o *Options, cw *cassette.Writer, st Step, a verify.Answer, outcome string, started, ended time.Time) {
	if cw != nil {
		cw.Call(cassette.Recorded{Tool: st.Tool, Arguments: st.Arguments, Outcome: outcome,
			Result: a.Result, Error: a.Error, StartedAt: started, Duration: ended.Sub(started)})
	}
	if o.Report == nil {
		return
	}
	args := []byte(st.Arguments)
	if args == nil {
		args = []byte("{}")
	}
	rs := report.Step{
		Tool:       redact.Label(st.Tool, 256),
		ReceivedAt: started.UTC(), StartedAt: started.UTC(), EndedAt: ended.UTC(),
		DurationMs: float64(ended.Sub(started).Microseconds()) / 1000,
		Outcome:    outcome,
	}
	rs.ArgsFingerprint, _ = jcs.Fingerprint(st.Arguments)
	out, clipped := redact.Report(args, reportArgs)
	rs.Args, rs.ArgsClipped = bytes.Clone(out), clipped
	if a.Result != nil {
		out, clipped := redact.Report(a.Result, reportResult)
		rs.Result, rs.ResultClipped = bytes.Clone(out), clipped
	}
	if a.Error != nil {
		out, _ := redact.Report(a.Error, reportError)
		rs.Error = bytes.Clone(out)
	}
	o.Report(rs)
}

// printResult prints a result for a person: each text block's text, other blocks (and
// a result with no content, its structuredContent or itself) as JSON, one per line,
// control characters escaped.
func printResult(w io.Writer, result []byte) {
	content := jsonlex.Get(result, "content")
	n := 0
	jsonlex.EachElement(content, func(b []byte) {
		n++
		if jsonlex.StringOf(jsonlex.Get(b, "type")) == "text" {
			if t := jsonlex.Get(b, "text"); t != nil && t[0] == '"' {
				s := jsonlex.StringOf(t)
				io.WriteString(w, termtext.Text(s))
				if len(s) == 0 || s[len(s)-1] != '\n' {
					io.WriteString(w, "\n")
				}
				return
			}
		}
		printJSON(w, b)
	})
	if n > 0 {
		return
	}
	if sc := jsonlex.Get(result, "structuredContent"); sc != nil {
		printJSON(w, sc)
		return
	}
	printJSON(w, result)
}

// printTools prints the tools' names, one a line (--json: the list as sent).
func printTools(w io.Writer, all []byte, asJSON bool) {
	if asJSON {
		printJSON(w, orEmpty(all))
		return
	}
	jsonlex.EachElement(all, func(t []byte) {
		io.WriteString(w, termtext.Line(jsonlex.StringOf(jsonlex.Get(t, "name")))+"\n")
	})
}

// printJSON prints raw JSON on one line: whitespace between tokens made a space, and
// inside strings the characters a terminal acts on (DEL, C1, line separators, bidi
// controls) as \u escapes, so it stays the same JSON. raw is as a peer sent it, whole.
func printJSON(w io.Writer, raw []byte) {
	w.Write(append(SafeJSON(nil, raw), '\n'))
}

// SafeJSON appends raw (valid JSON) to b as printJSON prints it.
func SafeJSON(b, raw []byte) []byte {
	in := false
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case !in && (c == '\n' || c == '\r' || c == '\t'):
			b = append(b, ' ')
		case c == '"':
			in = !in
			b = append(b, c)
		case in && c == '\\' && i+1 < len(raw):
			b = append(b, c, raw[i+1])
			i += 2
			continue
		case c < 0x20 || c == 0x7f:
			b = appendU(b, rune(c))
		case c < 0x80:
			b = append(b, c)
		default:
			r, n := utf8.DecodeRune(raw[i:])
			switch {
			case r == utf8.RuneError && n == 1:
				b = appendU(b, utf8.RuneError)
			case r >= 0x80 && r <= 0x9f, r == 0x2028, r == 0x2029, r == 0x061c,
				r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
				b = appendU(b, r)
			default:
				b = append(b, raw[i:i+n]...)
			}
			i += n
			continue
		}
		i++
	}
	return b
}

func appendU(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}
