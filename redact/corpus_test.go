package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// Report and Text on a corpus of inputs (differentialInputs) at several budgets
// (differentialBudgets): what they give is pinned in testdata/report-golden.jsonl
// (TestReportGolden; regenerate with -update and read the diff), and every output is
// held to properties that need no second implementation (checkReport): valid JSON on
// one line, within the budget, no secret left under a secret key or from the input,
// and a fixed point, redacting it again changes nothing. The contract's redaction
// corpus (TestRedactionCorpus) pins the rules themselves.

// differentialBudgets are the budgets every input is reported at: the default, and
// small ones that force the clipping passes (where the memos and markers are).
var differentialBudgets = []int{0, 4096, 700, 256, 120, 40}

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

var updateGolden = flag.Bool("update", false, "rewrite testdata/report-golden.jsonl from the current Report and Text")

const goldenFile = "testdata/report-golden.jsonl"

// goldenCase is one input of the golden file: the sha256 of the input (which
// differentialInputs makes), its first bytes for the reader, and Text of it and
// Report of it at each budget (as pinned keeps them).
type goldenCase struct {
	In      string         `json:"in"`
	Preview string         `json:"preview"`
	Text    string         `json:"text"`
	Reports []goldenReport `json:"reports"`
}

// goldenReport is Report's output at budgets that give the same.
type goldenReport struct {
	Budgets []int  `json:"budgets"`
	Out     string `json:"out"`
	Clipped bool   `json:"clipped,omitempty"`
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func goldenOf(in []byte) goldenCase {
	c := goldenCase{In: sha256Hex(in), Preview: string(in[:utf8Cut(in, 80)])}
	c.Text = pinned(Text(string(in)))
	for _, b := range differentialBudgets {
		out, clipped := Report(in, b)
		r := goldenReport{[]int{b}, pinned(string(out)), clipped}
		if n := len(c.Reports); n > 0 && c.Reports[n-1].Out == r.Out && c.Reports[n-1].Clipped == r.Clipped {
			c.Reports[n-1].Budgets = append(c.Reports[n-1].Budgets, b)
			continue
		}
		c.Reports = append(c.Reports, r)
	}
	return c
}

// pinned is s as the golden file holds it: itself, or its sha256 when it is over 2 KiB
// or not UTF-8 (which the file's JSON cannot hold byte for byte).
func pinned(s string) string {
	if len(s) <= 2<<10 && utf8.ValidString(s) && !strings.HasPrefix(s, "sha256:") {
		return s
	}
	return sha256Hex([]byte(s))
}

// utf8Cut is the largest n <= max at which b can be cut between characters.
func utf8Cut(b []byte, max int) int {
	if len(b) <= max {
		return len(b)
	}
	for max > 0 && !utf8.RuneStart(b[max]) {
		max--
	}
	return max
}

// TestReportGolden: Report and Text give, on every input of the corpus at every
// budget, the bytes they gave when the golden file was written (the redaction as it
// was when its frozen reference copy was retired, issue 35). A change of behaviour is
// made on purpose: go test ./redact -run TestReportGolden -update, and the diff of
// the file is the change.
func TestReportGolden(t *testing.T) {
	ins := differentialInputs(t)
	if *updateGolden {
		var b bytes.Buffer
		seen := map[string]bool{}
		for _, in := range ins {
			c := goldenOf(in)
			if seen[c.In] {
				continue
			}
			seen[c.In] = true
			line, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(goldenFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatalf("%v (go test ./redact -run TestReportGolden -update writes it)", err)
	}
	want := map[string]goldenCase{}
	for line := range bytes.Lines(raw) {
		var c goldenCase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("%s: %v", goldenFile, err)
		}
		want[c.In] = c
	}
	used := map[string]bool{}
	for _, in := range ins {
		got := goldenOf(in)
		w, ok := want[got.In]
		if !ok {
			t.Errorf("input %.80q is not in %s (-update adds it)", in, goldenFile)
			continue
		}
		used[got.In] = true
		if got.Text != w.Text {
			t.Errorf("Text(%.80q) = %.300q, golden %.300q", in, got.Text, w.Text)
		}
		if g, w := fmt.Sprintf("%+v", got.Reports), fmt.Sprintf("%+v", w.Reports); g != w {
			t.Errorf("Report(%.80q) at budgets %v:\n got %.600s\nwant %.600s", in, differentialBudgets, g, w)
		}
	}
	if len(used) != len(want) {
		t.Errorf("%s has %d inputs the corpus no longer makes (-update drops them)", goldenFile, len(want)-len(used))
	}
}

// TestReportProperties: every input of the corpus at every budget passes checkReport.
func TestReportProperties(t *testing.T) {
	z := usedRedactor()
	for _, in := range differentialInputs(t) {
		for _, budget := range differentialBudgets {
			checkReport(t, in, budget, z)
		}
	}
}

// FuzzReportProperties: on any bytes at any budget, Report passes checkReport.
func FuzzReportProperties(f *testing.F) {
	for _, in := range differentialInputs(f) {
		if len(in) < 8<<10 {
			f.Add(in, uint16(0))
			f.Add(in, uint16(300))
		}
	}
	z := usedRedactor()
	f.Fuzz(func(t *testing.T, in []byte, b uint16) {
		budget := int(b)
		if b%7 == 0 {
			budget = 0
		}
		checkReport(t, in, budget, z)
	})
}

// checkReport checks Report(in, budget): the same bytes from z, a Redactor used
// before; valid JSON with no raw line break, within the budget; a fixed point (its
// report at the same budget is the same JSON value, not clipped); under every key
// that names a secret, in the output and in any JSON text inside its strings, the
// value "[REDACTED]"; and no string of 8 bytes or more that the input holds under a
// secret key (and nowhere else) anywhere in the output.
func checkReport(t *testing.T, in []byte, budget int, z *Redactor) {
	t.Helper()
	out, clipped := Report(in, budget)
	if again, c := z.Report(in, budget); !bytes.Equal(again, out) || c != clipped {
		t.Fatalf("Report(%q, %d) = %q %v, a used Redactor gives %q %v", in, budget, out, clipped, again, c)
	}
	if !json.Valid(out) || bytes.ContainsAny(out, "\r\n") {
		t.Fatalf("Report(%q, %d) = %q: not JSON on one line", in, budget, out)
	}
	limit := budget
	if limit <= 0 {
		limit = DefaultBudget
	}
	if len(out) > max(limit, len("null")) {
		t.Fatalf("Report(%q, %d): %d bytes, over the budget", in, budget, len(out))
	}
	again, c := Report(out, budget)
	// A clip marker is the proxy's own text: one that lands just after a secret
	// key's separator ("Api key000":…[clipped ...]) reads as that key's value to the
	// text rules, and is redacted when reported again. Nothing of the input's is left
	// there, so such an output is no fixed point and need not be.
	markerRedacted := bytes.Contains(out, []byte("[clipped ")) && bytes.Contains(again, []byte("[REDACTED]"))
	if !markerRedacted && (c || !sameJSON(again, out)) {
		t.Fatalf("Report(%q, %d) = %q, and reported again %q (clipped %v)", in, budget, out, again, c)
	}
	outWalk := walkJSON(out, true)
	for _, v := range outWalk.secretValues {
		if v != `"[REDACTED]"` {
			t.Fatalf("Report(%q, %d) = %q: %s under a secret key", in, budget, out, v)
		}
	}
	inWalk := walkJSON(in, false)
	for _, s := range inWalk.secretStrings {
		if len(s) < 8 || strings.Contains(inWalk.otherText, s) {
			continue
		}
		if strings.Contains(outWalk.otherText, s) || bytes.Contains(out, []byte(s)) {
			t.Fatalf("Report(%q, %d) = %q: the secret %q survived", in, budget, out, s)
		}
	}
}

// sameJSON says whether a and b are the same JSON value, members in the same order,
// duplicates and all, strings compared decoded and numbers by their text, and a
// string that is itself a JSON object or array compared as that value (Report
// re-renders the JSON inside strings: a \ufffd escape there may come back as the
// character).
func sameJSON(a, b []byte) bool {
	na, oka := normalJSON(a)
	nb, okb := normalJSON(b)
	return oka && okb && na == nb
}

// normalJSON is the token stream of b as sameJSON compares it.
func normalJSON(b []byte) (string, bool) {
	var s strings.Builder
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return s.String(), true
		}
		if err != nil {
			return "", false
		}
		if v, ok := tok.(string); ok {
			if t := strings.TrimSpace(v); t != "" && (t[0] == '{' || t[0] == '[') {
				if inner, ok := normalJSON([]byte(t)); ok {
					fmt.Fprintf(&s, "J%q ", inner)
					continue
				}
			}
		}
		fmt.Fprintf(&s, "%T%q ", tok, fmt.Sprint(tok))
	}
}

// jsonWalk is what walkJSON finds in a JSON text.
type jsonWalk struct {
	// secretValues are the raw values of members whose key names a secret.
	secretValues []string
	// secretStrings are the strings (and keys) inside those values.
	secretStrings []string
	// otherText is every other string, key and number, joined by NUL.
	otherText string
}

// walkJSON reads b with encoding/json (nothing when it is not JSON) and sorts what it
// holds into jsonWalk; with embedded, a string that is itself a JSON object or array
// is walked too, as Report redacts it.
func walkJSON(b []byte, embedded bool) jsonWalk {
	var w jsonWalk
	var other strings.Builder
	type frame struct {
		obj, expectKey bool
		secret         bool // inside a value under a secret key
		root           int  // for the value itself, where it starts; else -1
	}
	for queue := [][]byte{b}; len(queue) > 0; queue = queue[1:] {
		text := queue[0]
		raw := func(from, to int64) string { return strings.TrimLeft(string(text[from:to]), " \t\r\n:,") }
		d := json.NewDecoder(bytes.NewReader(text))
		d.UseNumber()
		var stack []frame
		underKey := false // the next value is under a key that names a secret
		for {
			before := d.InputOffset()
			tok, err := d.Token()
			if err != nil {
				break
			}
			inSecret := len(stack) > 0 && stack[len(stack)-1].secret
			if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].expectKey && tok != json.Delim('}') {
				k := tok.(string)
				stack[n-1].expectKey = false
				if inSecret {
					w.secretStrings = append(w.secretStrings, k)
				} else {
					other.WriteString(k + "\x00")
					underKey = IsSecretKey(k)
				}
				continue
			}
			under := underKey
			underKey = false
			switch tok {
			case json.Delim('{'), json.Delim('['):
				f := frame{obj: tok == json.Delim('{'), expectKey: true, secret: inSecret || under, root: -1}
				if under {
					f.root = int(before)
				}
				stack = append(stack, f)
				continue
			case json.Delim('}'), json.Delim(']'):
				f := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if f.root >= 0 {
					w.secretValues = append(w.secretValues, raw(int64(f.root), d.InputOffset()))
				}
			default:
				switch v := tok.(type) {
				case string:
					if inSecret || under {
						w.secretStrings = append(w.secretStrings, v)
						break
					}
					other.WriteString(v + "\x00")
					if t := strings.TrimSpace(v); embedded && t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
						queue = append(queue, []byte(t))
					}
				case json.Number:
					if !inSecret && !under {
						other.WriteString(string(v) + "\x00")
					}
				}
				if under {
					w.secretValues = append(w.secretValues, raw(before, d.InputOffset()))
				}
			}
			if n := len(stack); n > 0 && stack[n-1].obj {
				stack[n-1].expectKey = true
			}
		}
	}
	w.otherText = other.String()
	return w
}

// TestShortestWordSecrets holds minWordSecret to the shortest texts scanWords finds a
// secret in (14 bytes): were it one more, these would pass unredacted.
func TestShortestWordSecrets(t *testing.T) {
	for _, c := range [][2]string{{"Basic YWI6Yw==", "Basic [REDACTED]"}, {"eyJhbGciOi.ab.", "[REDACTED]"}} {
		if got := Text(c[0]); got != c[1] {
			t.Errorf("Text(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}

// TestWalkJSON: checkReport's oracle finds the values under secret keys, nested and
// in JSON inside a string, and tells them from the rest.
func TestWalkJSON(t *testing.T) {
	in := `{"password":"hunter2hunter2","x":{"token" : {"a":["b",1]}},"s":"{\"apiKey\":\"zzz\"}","n":7,"name":"pw"}`
	w := walkJSON([]byte(in), true)
	if got := fmt.Sprintf("%q", w.secretValues); got != `["\"hunter2hunter2\"" "{\"a\":[\"b\",1]}" "\"zzz\""]` {
		t.Errorf("secret values %s", got)
	}
	if got := fmt.Sprintf("%q", w.secretStrings); got != `["hunter2hunter2" "a" "b" "zzz"]` {
		t.Errorf("secret strings %s", got)
	}
	if got := w.otherText; got != "password\x00x\x00token\x00s\x00{\"apiKey\":\"zzz\"}\x00n\x007\x00name\x00pw\x00apiKey\x00" {
		t.Errorf("other text %q", got)
	}
	if w := walkJSON([]byte(in), false); len(w.secretValues) != 2 {
		t.Errorf("without embedded: %q", w.secretValues)
	}
	if !sameJSON([]byte(`{"a":"{\"b\":\"\\ufffd\"}"}`), []byte("{\"a\":\"{\\\"b\\\":\\\"\uFFFD\\\"}\"}")) || sameJSON([]byte(`{"a":1}`), []byte(`{"a":1.0}`)) {
		t.Error("sameJSON")
	}
}
