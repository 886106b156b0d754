package cassette

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// decodeCall reads a call line (checked whole JSON already) into c, as strict as
// encoding/json with DisallowUnknownFields but without its reflection: the reader's
// cost per call was a fifth of verify's. Raw members are copied verbatim; of a member
// given twice the last wins.
func decodeCall(line []byte, c *Call) error {
	var err error
	fail := func(key string, e error) bool {
		err = fmt.Errorf("member %q: %w", key, e)
		return false
	}
	_, ok := jsonlex.EachMember(line, jsonlex.SkipSpace(line, 0), func(m jsonlex.Member) bool {
		key, _ := jsonlex.DecodeString(line[m.Key.Start:m.Key.End])
		v := line[m.Value.Start:m.Value.End]
		switch key {
		case "seq":
			n, e := strconv.ParseInt(string(v), 10, 64)
			if e != nil {
				return fail(key, errors.New("not an integer"))
			}
			c.Seq = n
		case "tool", "outcome", "startedAt":
			s, ok := jsonlex.DecodeString(v)
			if !ok || v[0] != '"' {
				return fail(key, errors.New("not a string"))
			}
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
			raw := bytes.Clone(v)
			if string(v) == "null" {
				raw = nil
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
				c.RedactedKeys = append(c.RedactedKeys, s)
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
