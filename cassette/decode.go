package cassette

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// validUTF8 is s with each byte that is not UTF-8 replaced by U+FFFD, as
// encoding/json decodes a string (the fuzz target found the difference).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // an invalid byte ranges as utf8.RuneError, one byte wide
	}
	return b.String()
}

// errNotCall is a line with a member no call has but the end line or a header does.
type errNotCall struct{ key string }

func (e errNotCall) Error() string { return "a member " + strconv.Quote(e.key) }

// decodeCall reads a call line (checked whole JSON already) into c, as strict as
// encoding/json with DisallowUnknownFields but without its reflection: the reader's
// cost per call was a fifth of verify's. Raw members are copied verbatim; of a member
// given twice the last wins.
//
// The line is read once: a member "end" or the header's magic is errNotCall, for the
// caller to read the line as the end line or refuse it as a second header (looked up
// first, they were two more walks of every line). With keep false the raw members are
// slices of line, not copies (a Reader's Skip, which keeps nothing).
func decodeCall(line []byte, c *Call, keep bool) error {
	var err error
	fail := func(key string, e error) bool {
		err = fmt.Errorf("member %q: %w", key, e)
		return false
	}
	_, ok := jsonlex.EachMember(line, jsonlex.SkipSpace(line, 0), func(m jsonlex.Member) bool {
		key, _ := jsonlex.DecodeString(line[m.Key.Start:m.Key.End])
		v := line[m.Value.Start:m.Value.End]
		switch key {
		case "seq", "tooLarge":
			n, e := strconv.ParseInt(string(v), 10, 64)
			if e != nil {
				return fail(key, errors.New("not an integer"))
			}
			if key == "seq" {
				c.Seq = n
			} else {
				c.TooLarge = n
			}
		case "tool", "outcome", "startedAt":
			s, ok := jsonlex.DecodeString(v)
			if !ok || v[0] != '"' {
				return fail(key, errors.New("not a string"))
			}
			s = validUTF8(s)
			switch key {
			case "tool":
				c.Tool = s
			case "outcome":
				c.Outcome = s
			default:
				t, e := time.Parse(time.RFC3339Nano, s)
				if e != nil {
					return fail(key, e)
				}
				c.StartedAt = t
			}
		case "arguments", "result", "error":
			raw := v
			switch {
			case string(v) == "null":
				raw = nil
			case keep:
				raw = bytes.Clone(v)
			}
			switch key {
			case "arguments":
				c.Arguments = raw
			case "result":
				c.Result = raw
			default:
				c.Error = raw
			}
		case "redacted":
			switch string(v) {
			case "true", "false":
				c.Redacted = string(v) == "true"
			default:
				return fail(key, errors.New("not a boolean"))
			}
		case "redactedKeys":
			if v[0] != '[' {
				return fail(key, errors.New("not an array"))
			}
			c.RedactedKeys = nil
			bad := false
			jsonlex.EachElement(v, func(e []byte) {
				s, ok := jsonlex.DecodeString(e)
				if !ok || e[0] != '"' {
					bad = true
				}
				c.RedactedKeys = append(c.RedactedKeys, validUTF8(s))
			})
			if bad {
				return fail(key, errors.New("not an array of strings"))
			}
		case "durationMs":
			f, e := strconv.ParseFloat(string(v), 64)
			if e != nil {
				return fail(key, errors.New("not a number"))
			}
			c.DurationMs = f
		case "end", magic:
			err = errNotCall{key}
			return false
		default:
			err = fmt.Errorf("json: unknown field %q", key)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("not a JSON object")
	}
	return nil
}
