// Package redact makes the args, result and error of a step report safe and small
// (SPEC §3.3): secrets are replaced by [REDACTED], then long values are clipped so the
// report stays under a fixed size whatever the call carried.
//
// It works on the raw JSON bytes, never through map[string]any: object keys keep their
// order, numbers their exact text (9007199254740993 stays 9007199254740993), and a
// 100 MB value is scanned, not materialised. Only what is shown is decoded and run
// through the redaction rules; what is cut is only hashed. Report and Text keep no
// state between calls and are safe to call from any number of goroutines; a Redactor
// is Report for one goroutine, keeping its buffers from one value to the next.
//
// # Clip markers
//
// A cut is marked where it happened, with how much was cut and the sha256 of the whole
// original value (before redaction), so a reader holding the original can tell it is
// the same one:
//
//	"the kept text…[clipped 1046528 of 1048576 bytes sha256:<hex>]"  a string
//	["a", "b", "…[clipped 999998 of 1000000 items sha256:<hex>]"]  an array
//	{"a": 1, "…": "[clipped 1200 of 1201 members sha256:<hex>]"}  an object
//	"[clipped object, 52311 bytes sha256:<hex>]"  a container nested too deep
//	"[clipped number, 70000 bytes sha256:<hex>]"  an absurdly long number
//	"[clipped object, 104857600 bytes sha256:<hex>]"  the whole value, when nothing else fits
//
// The sha256 of a string is over its decoded text, as UTF-8 (the bytes a program
// holding the string would hash; for a base64 image, the base64 text); byte counts of a
// string are of that text too. The sha256 of an array, object or number is over its JSON
// text exactly as received (from its first byte to its last, whitespace inside
// included); so is that of text that is not JSON.
//
// Hashing the original, secrets included, is what makes the hash useful, and it means
// the hash could confirm a guess of a weak secret inside a clipped value whose every
// other byte the guesser knows. What is cut is usually kilobytes the reader never saw,
// so this is accepted.
//
// Strings are kept up to 2 KiB, object keys up to 256 bytes, arrays up to 100 items,
// objects up to 1000 members, nesting up to 32 levels, and base64 blobs (the data of an
// MCP image or audio item, an embedded resource's blob, or any long string that is
// clearly base64) to their first 32 characters. When the result is still over the
// budget, the limits shrink and the value is rendered again, down to a summary marker
// for the whole value. Nothing is cut that is not longer than a marker: a cut never
// makes the output grow.
package redact
