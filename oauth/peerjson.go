package oauth

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// maxPeerDepth bounds the nesting of a document an authorization server (or a
// protected resource) sends. Metadata, token and registration answers are a few
// levels deep; encoding/json and gjson recurse once per level, so a hostile server
// sending a megabyte of '[' would have the decoder recurse that deep (gjson sets no
// limit at all: a stack overflow is fatal to the proxy, not an error).
const maxPeerDepth = 32

// errTooDeep is a peer's document nested past maxPeerDepth.
var errTooDeep = fmt.Errorf("nested deeper than %d levels", maxPeerDepth)

// checkPeerJSON says why b, a peer's bytes, must not reach a recursive decoder: it is
// not one JSON value (checked by jsonlex, a loop), or it nests past maxPeerDepth
// (counted by a loop too). nil: encoding/json may decode it, recursing at most
// maxPeerDepth levels.
func checkPeerJSON(b []byte) error {
	if !jsonlex.Valid(b) {
		return errors.New("not JSON")
	}
	if tooDeep(b, maxPeerDepth) {
		return errTooDeep
	}
	return nil
}

// tooDeep reports whether the valid JSON b opens more than max containers at once.
func tooDeep(b []byte, max int) bool {
	depth := 0
	for i := 0; i < len(b); {
		switch b[i] {
		case '"':
			if i = jsonlex.SkipString(b, i); i < 0 {
				return true // not valid: never passed on
			}
			continue
		case '{', '[':
			if depth++; depth > max {
				return true
			}
		case '}', ']':
			depth--
		}
		i++
	}
	return false
}

// decodePeerJSON is json.Unmarshal of a peer's document, after checkPeerJSON.
func decodePeerJSON(b []byte, v any) error {
	if err := checkPeerJSON(b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
