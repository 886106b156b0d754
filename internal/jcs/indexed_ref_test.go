package jcs

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

// canonicalizeIndexed is Canonicalize as it was before the flat index: the
// reference the flat index must match byte for byte and error for error.
func canonicalizeIndexed(w io.Writer, raw []byte) error {
	ws := new(jcsWorkspace)
	ix, err := jcsScan(raw, ws)
	if err != nil {
		return err
	}
	if ix.suspect >= 0 {
		dry := newJCSEmitter(raw, ix, ws, bufio.NewWriterSize(io.Discard, 512))
		dry.run()
		if dry.bad != nil {
			return dry.bad
		}
	}
	bw := bufio.NewWriterSize(w, jcsBufferSize(len(raw)))
	e := newJCSEmitter(raw, ix, ws, bw)
	e.run()
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write canonical JSON: %w", err)
	}
	return nil
}

func fingerprintIndexed(args []byte) (string, error) {
	if argumentsAbsent(args) {
		args = []byte("{}")
	}
	h := sha256.New()
	if err := canonicalizeIndexed(h, args); err != nil {
		return "", fmt.Errorf("fingerprint arguments: %w", err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
