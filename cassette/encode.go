package cassette

import (
	"strconv"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// The encoders write members in a fixed order and embed every raw value as its bytes
// (oneLine aside): encoding/json would compact them and escape <, > and &.

// appendHeader appends h; tools, when given, are its tools (each a tool object) in
// place of h.Tools.
func appendHeader(b []byte, h *Header, tools [][]byte) []byte {
	b = append(b, `{"bir-cassette":`...)
	b = strconv.AppendInt(b, int64(h.Version), 10)
	b = appendStr(b, "server", h.Server)
	if len(h.Command) > 0 {
		b = append(b, `,"command":[`...)
		for i, a := range h.Command {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonlex.AppendString(b, a)
		}
		b = append(b, ']')
	}
	if h.URL != "" {
		b = appendStr(b, "url", h.URL)
	}
	b = appendStr(b, "recordedAt", h.RecordedAt.UTC().Format(time.RFC3339Nano))
	b = appendStr(b, "era", h.Era)
	if h.ProtocolVersion != "" {
		b = appendStr(b, "protocolVersion", h.ProtocolVersion)
	}
	b = appendRaw(b, "initialize", h.Initialize)
	if h.Initialized {
		b = append(b, `,"initialized":true`...)
	}
	b = appendRaw(b, "initializeResult", h.InitializeResult)
	b = appendRaw(b, "meta", h.Meta)
	b = appendRaw(b, "discoverResult", h.DiscoverResult)
	if len(tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i, t := range tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = oneLine(b, t)
		}
		b = append(b, ']')
	} else {
		b = appendRaw(b, "tools", h.Tools)
	}
	if h.Dropped > 0 {
		b = append(b, `,"dropped":`...)
		b = strconv.AppendInt(b, h.Dropped, 10)
	}
	return append(b, '}', '\n')
}

func appendCall(b []byte, c *Call) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, c.Seq, 10)
	b = appendStr(b, "tool", c.Tool)
	b = appendRaw(b, "arguments", c.Arguments)
	if c.Redacted {
		b = append(b, `,"redacted":true`...)
		if len(c.RedactedKeys) > 0 {
			b = append(b, `,"redactedKeys":[`...)
			for i, k := range c.RedactedKeys {
				if i > 0 {
					b = append(b, ',')
				}
				b = jsonlex.AppendString(b, k)
			}
			b = append(b, ']')
		}
	}
	b = appendStr(b, "outcome", c.Outcome)
	b = appendRaw(b, "result", c.Result)
	b = appendRaw(b, "error", c.Error)
	b = appendStr(b, "startedAt", c.StartedAt.UTC().Format(time.RFC3339Nano))
	b = append(b, `,"durationMs":`...)
	b = strconv.AppendFloat(b, c.DurationMs, 'f', -1, 64)
	if c.TooLarge > 0 {
		b = append(b, `,"tooLarge":`...)
		b = strconv.AppendInt(b, c.TooLarge, 10)
	}
	return append(b, '}', '\n')
}

func appendEnd(b []byte, e *End) []byte {
	b = append(b, `{"end":true,"calls":`...)
	b = strconv.AppendInt(b, e.Calls, 10)
	if e.Dropped > 0 {
		b = append(b, `,"dropped":`...)
		b = strconv.AppendInt(b, e.Dropped, 10)
	}
	return append(b, '}', '\n')
}

func appendStr(b []byte, key, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return jsonlex.AppendString(b, v)
}

// appendRaw appends the member key: raw, unless raw is empty.
func appendRaw(b []byte, key string, raw []byte) []byte {
	if len(raw) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return oneLine(b, raw)
}

// oneLine appends raw with each CR and LF turned into a space. In valid JSON they can
// only be whitespace between tokens (a string holds them escaped), so the value is the
// same JSON, and the line stays one line. (An HTTP server may send its JSON pretty
// printed.)
func oneLine(b, raw []byte) []byte {
	start := len(b)
	b = append(b, raw...)
	for i := start; i < len(b); i++ {
		if b[i] == '\n' || b[i] == '\r' {
			b[i] = ' '
		}
	}
	return b
}
