package redact

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// The fast paths (issue 13, redaction round 3) must not change one byte of a report:
// reference_test.go is the package as it was before them, renamed, and these tests hold
// the two side by side.

// differentialBudgets are the budgets every input is compared at: the default, and
// small ones that force the clipping passes (where the memos and markers are).
var differentialBudgets = []int{0, 4096, 700, 256, 120, 40}

// sameAsReference fails t when Report, a reused Redactor or Text disagree with the
// reference on in.
func sameAsReference(t *testing.T, in []byte, budget int, z *Redactor, rz *refPubRedactor) {
	t.Helper()
	want, wantClipped := refPubReport(in, budget)
	if got, clipped := Report(in, budget); !bytes.Equal(got, want) || clipped != wantClipped {
		t.Fatalf("Report(%q, %d) = %q %v, the reference gives %q %v", in, budget, got, clipped, want, wantClipped)
	}
	rwant, _ := rz.Report(in, budget)
	if !bytes.Equal(rwant, want) {
		t.Fatalf("reference Redactor disagrees with reference Report on %q", in)
	}
	if got, _ := z.Report(in, budget); !bytes.Equal(got, want) {
		t.Fatalf("Redactor.Report(%q, %d) = %q, the reference gives %q", in, budget, got, want)
	}
	if got, want := Text(string(in)), refPubText(string(in)); got != want {
		t.Fatalf("Text(%q) = %q, the reference gives %q", in, got, want)
	}
}

// differentialInputs are the redaction corpus's arguments (as they are, and as the text
// item of a tool result, the common shape), the fuzz seeds and the benchmarks' inputs.
func differentialInputs(t testing.TB) [][]byte {
	raw, err := os.ReadFile(testutil.ContractFile(t, "redaction-corpus.json"))
	if err != nil {
		t.Fatalf("read the redaction corpus: %v", err)
	}
	var corpus struct {
		Cases []struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatalf("decode the redaction corpus: %v", err)
	}
	var ins [][]byte
	add := func(b []byte) { ins = append(ins, b) }
	asResult := func(b []byte) []byte {
		return must(json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": string(b)}}, "isError": false}))
	}
	for _, c := range corpus.Cases {
		add(c.Arguments)
		add(asResult(c.Arguments))
		add(asResult(asResult(c.Arguments)))
		var v any
		if json.Unmarshal(c.Arguments, &v) == nil {
			add(must(json.MarshalIndent(v, "", "  ")))
		}
	}
	for _, s := range reportSeeds() {
		add([]byte(s))
		add(asResult([]byte(s)))
	}
	add([]byte(smallArgs))
	add([]byte(toolResult))
	add(bigText(200 << 10))
	add(bigArray(3000))
	add(bigImage(64 << 10))
	add(must(json.Marshal(map[string]string{"clientSecret": "a", "CLIENT_SECRET": "b", "x-api-key": "c",
		"max_tokens": "d", "keyword": "e", "APIKey": "f", "token2": "g", "Value": "h", "NAME": "i",
		"db.password": "j", "\u00e9token": "k", "a\\\"b": "l", strings.Repeat("k", 300): "m"})))
	add([]byte(`{"a\u0070iKey":"x","t\u006fken":"y","na\u006de":"API_KEY","value":"z","\u0064ata":"iVBOR"}`))
	add([]byte(`[{"name":"API_KEY","value":"v"},{"key":"password","value":"w"},{"value":"u","name":"token"}]`))
	add([]byte(`{"text":"Authorization: Bearer abc.def-123 and ghp_` + strings.Repeat("x", 36) + ` at postgres://u:p@h/db?sslmode=x&password=y"}`))
	return ins
}

func TestMatchesReference(t *testing.T) {
	z, rz := usedRedactor(), new(refPubRedactor)
	for _, in := range differentialInputs(t) {
		for _, budget := range differentialBudgets {
			sameAsReference(t, in, budget, z, rz)
		}
	}
}

// FuzzReportReference: on any bytes at any budget, Report gives what the reference gives.
func FuzzReportReference(f *testing.F) {
	for _, in := range differentialInputs(f) {
		if len(in) < 8<<10 {
			f.Add(in, uint16(0))
			f.Add(in, uint16(300))
		}
	}
	z, rz := usedRedactor(), new(refPubRedactor)
	f.Fuzz(func(t *testing.T, in []byte, b uint16) {
		budget := int(b)
		if b%7 == 0 {
			budget = 0
		}
		sameAsReference(t, in, budget, z, rz)
	})
}

// TestShortestWordSecrets holds minWordSecret to the shortest texts scanWords finds a
// secret in (14 bytes): were it one more, these would pass unredacted.
func TestShortestWordSecrets(t *testing.T) {
	for _, s := range []string{"Basic YWI6Yw==", "eyJhbGciOi.ab."} {
		if got := Text(s); got == s || got != refPubText(s) {
			t.Errorf("Text(%q) = %q, the reference gives %q", s, got, refPubText(s))
		}
	}
}
