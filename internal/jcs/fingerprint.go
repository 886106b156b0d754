package jcs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Fingerprint returns "sha256:" + hex(sha256(JCS(arguments))) exactly as SPEC §3.2 says.
// args is the raw JSON text of params.arguments with the correlation key already removed
// (nil, empty, or JSON null hash as {}). Any other non-object value hashes as its own JCS.
//
// The canonical bytes stream into the hash and are never held in memory, so
// a call carrying a 100 MB string costs little beyond the string itself.
func Fingerprint(args []byte) (string, error) {
	if argumentsAbsent(args) {
		// The host sees an empty tool_input when arguments are absent or null.
		args = []byte("{}")
	}
	h := sha256.New()
	if err := Canonicalize(h, args); err != nil {
		return "", fmt.Errorf("fingerprint arguments: %w", err)
	}
	const prefix = "sha256:"
	var out [len(prefix) + 2*sha256.Size]byte
	copy(out[:], prefix)
	hex.Encode(out[len(prefix):], h.Sum(nil))
	return string(out[:]), nil
}

func argumentsAbsent(args []byte) bool {
	return len(args) == 0 || string(bytes.Trim(args, " \t\r\n")) == "null"
}
