package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// report runs Report and checks what must hold of every output: valid JSON, within the
// budget, and the same bytes from a Redactor that has rendered another value before.
func report(t *testing.T, in []byte, budget int) (string, bool) {
	t.Helper()
	out, clipped := Report(in, budget)
	if again, c := usedRedactor().Report(in, budget); !bytes.Equal(again, out) || c != clipped {
		t.Fatalf("Report(%.80q, %d) = %.200q (clipped %v), but a reused Redactor gives %.200q (clipped %v)", in, budget, out, clipped, again, c)
	}
	if !json.Valid(out) {
		t.Fatalf("Report(%.80q, %d) = %.200q: not valid JSON", in, budget, out)
	}
	if budget <= 0 {
		budget = DefaultBudget
	}
	if len(out) > budget {
		t.Fatalf("Report(%.80q, %d): %d bytes, over the budget", in, budget, len(out))
	}
	return string(out), clipped
}

// usedRedactor returns a Redactor whose buffers hold what an earlier value left in them:
// clipped text, a secret, JSON inside a string inside a string.
func usedRedactor() *Redactor {
	z := new(Redactor)
	inner := `{"token":"ghp_` + strings.Repeat("x", 36) + `","a":[` + strings.Repeat(`"yyyy",`, 200) + `1]}`
	dirty, _ := json.Marshal(map[string]any{
		"password": "hunter2",
		"text":     strings.Repeat("long text ", 400),
		"json":     inner,
		"deeper":   string(must(json.Marshal(inner))),
	})
	z.Report(dirty, 2000)
	z.Report(dirty, 0)
	return z
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestRedactionCorpus(t *testing.T) {
	raw, err := os.ReadFile(testutil.ContractFile(t, "redaction-corpus.json"))
	if err != nil {
		t.Fatalf("reading the corpus: %v", err)
	}
	var corpus struct {
		Cases []struct {
			Name           string          `json:"name"`
			Arguments      json.RawMessage `json:"arguments"`
			MustNotContain []string        `json:"mustNotContain"`
			MustContain    []string        `json:"mustContain"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatalf("decoding the corpus: %v", err)
	}
	if len(corpus.Cases) == 0 {
		t.Fatal("the corpus has no cases")
	}
	for _, c := range corpus.Cases {
		t.Run(c.Name, func(t *testing.T) {
			out, clipped := report(t, c.Arguments, DefaultBudget)
			if clipped {
				t.Errorf("clipped = true for a small value: %s", out)
			}
			for _, s := range c.MustNotContain {
				if strings.Contains(out, s) {
					t.Errorf("output %s holds %q", out, s)
				}
			}
			for _, s := range c.MustContain {
				if !strings.Contains(out, s) {
					t.Errorf("output %s lost %q", out, s)
				}
			}
		})
	}
}

func TestReportKeepsTextOrderAndNumbers(t *testing.T) {
	in := `{ "zeta": 9007199254740993, "alpha": [1.0, -0, 1e400, 0.1E-7, 123456789012345678901234567890],
	  "mid": {"b": true, "a": null, "c": false}, "héllo": "wörld 😀 \u00e9 \ud83d\ude00 \u2028 tab\t",
	  "dup": 1, "dup": 2, "esc": "quote \" backslash \\ slash \/ ctl \u0001" }`
	want := `{"zeta":9007199254740993,"alpha":[1.0,-0,1e400,0.1E-7,123456789012345678901234567890],` +
		`"mid":{"b":true,"a":null,"c":false},"héllo":"wörld 😀 é 😀 ` + "\u2028" + ` tab\t",` +
		`"dup":1,"dup":2,"esc":"quote \" backslash \\ slash / ctl \u0001"}`
	out, clipped := report(t, []byte(in), DefaultBudget)
	if out != want {
		t.Errorf("Report =\n%s\nwant\n%s", out, want)
	}
	if clipped {
		t.Error("clipped = true, want false")
	}
}

func TestReportInvalidUTF8BecomesReplacement(t *testing.T) {
	out, _ := report(t, []byte("{\"a\":\"x\xff\xfey\"}"), DefaultBudget)
	if out != `{"a":"x\ufffd\ufffdy"}` {
		t.Errorf("Report = %s", out)
	}
}

func TestReportSecretKeysAnyType(t *testing.T) {
	in := `{"password":"p","token":12345678901234567890,"apiKey":{"nested":"v","deeper":[1,2]},` +
		`"client_secret":["a","b"],"auth":true,"Cookie":null,"max_tokens":100,"keyword":"kw",` +
		`"nested":{"X-Auth-Token":"t0k"}}`
	want := `{"password":"[REDACTED]","token":"[REDACTED]","apiKey":"[REDACTED]",` +
		`"client_secret":"[REDACTED]","auth":"[REDACTED]","Cookie":"[REDACTED]","max_tokens":100,"keyword":"kw",` +
		`"nested":{"X-Auth-Token":"[REDACTED]"}}`
	if out, _ := report(t, []byte(in), DefaultBudget); out != want {
		t.Errorf("Report =\n%s\nwant\n%s", out, want)
	}
}

func TestReportNameValuePairsAndFlags(t *testing.T) {
	in := `{"env":[{"name":"DB_PASSWORD","value":"pw1"},{"name":"HOME","value":"/root"},{"value":"pw2","Name":"API_KEY"}],` +
		`"args":["--password","pw3","--user","bob","--token",{"x":"pw4"},"-v","--api-key=pw5"]}`
	out, _ := report(t, []byte(in), DefaultBudget)
	for _, s := range []string{"pw1", "pw2", "pw3", "pw4", "pw5"} {
		if strings.Contains(out, s) {
			t.Errorf("%s holds %q", out, s)
		}
	}
	for _, s := range []string{`"value":"/root"`, `"--user","bob"`, `"-v"`, `"--api-key=[REDACTED]"`} {
		if !strings.Contains(out, s) {
			t.Errorf("%s lost %q", out, s)
		}
	}
}

func TestReportRedactsKeysAndText(t *testing.T) {
	tok := fake("ghp_", 36)
	in := `{"` + tok + `":1,"note":"push with ` + tok + ` now","url":"https://u:pw9@h/x?sig=s1g&a=1"}`
	out, _ := report(t, []byte(in), DefaultBudget)
	for _, s := range []string{tok, "pw9", "s1g"} {
		if strings.Contains(out, s) {
			t.Errorf("%s holds %q", out, s)
		}
	}
	for _, s := range []string{"push with", " now", "https://u:", "@h/x?sig=", "&a=1"} {
		if !strings.Contains(out, s) {
			t.Errorf("%s lost %q", out, s)
		}
	}
}

func TestReportJSONInString(t *testing.T) {
	inner := `{"items":[{"id":9007199254740993,"token":"t1"},{"id":2,"note":"https://a:pw@h"}],"total":2}`
	outer, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": inner}}})
	out, clipped := report(t, outer, DefaultBudget)
	if clipped {
		t.Error("clipped = true")
	}
	var got struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Content) != 1 {
		t.Fatalf("output %s: %v", out, err)
	}
	want := `{"items":[{"id":9007199254740993,"token":"[REDACTED]"},{"id":2,"note":"https://a:[REDACTED]@h"}],"total":2}`
	if got.Content[0].Text != want {
		t.Errorf("embedded JSON = %s\nwant %s", got.Content[0].Text, want)
	}

	// Text that only looks like JSON stays text, redacted by the free-text rules.
	out, _ = report(t, []byte(`{"text":"{\"password\": \"hunter2\", not json"}`), DefaultBudget)
	if strings.Contains(out, "hunter2") || !strings.Contains(out, "not json") {
		t.Errorf("Report = %s", out)
	}
	// An array of JSON texts nested in JSON text.
	out, _ = report(t, []byte(`"[\"{\\\"secret\\\":\\\"s3\\\"}\"]"`), DefaultBudget)
	if strings.Contains(out, "s3") || !strings.Contains(out, "secret") {
		t.Errorf("Report = %s", out)
	}
}

func TestReportNotJSON(t *testing.T) {
	for in, want := range map[string]string{
		"":                            `""`,
		"plain text":                  `"plain text"`,
		"password=hunter2 and more":   `"password=[REDACTED] and more"`,
		`{"a":1} trailing`:            `"{\"a\":1} trailing"`,
		`{"a":1,}`:                    `"{\"a\":1,}"`,
		`{"a":01}`:                    `"{\"a\":01}"`,
		`["x\q"]`:                     `"[\"x\\q\"]"`,
		"{\"a\":\"line\nbreak\"}":     `"{\"a\":\"line\nbreak\"}"`,
		`{"token":"t","x":}`:          `"{\"token\":\"[REDACTED]\",\"x\":}"`,
		"\x00\x01 binary \xff":        `"\u0000\u0001 binary \ufffd"`,
		`tru`:                         `"tru"`,
		`{"a" 1}`:                     `"{\"a\" 1}"`,
		`[1 2]`:                       `"[1 2]"`,
		`"unterminated`:               `"\"unterminated"`,
		`{"k":"v"}{"k":"v"}`:          `"{\"k\":\"v\"}{\"k\":\"v\"}"`,
		" \t\n":                       `" \t\n"`,
		`{"Authorization":"Bearer x"`: `"{\"Authorization\":\"Bearer [REDACTED]\""`,
	} {
		if out, _ := report(t, []byte(in), DefaultBudget); out != want {
			t.Errorf("Report(%q) = %s, want %s", in, out, want)
		}
	}
}

var markerRE = regexp.MustCompile(`\[clipped (\d+) of (\d+) (bytes|items|members) sha256:([0-9a-f]{64})\]`)

// marker finds the one clip marker in out and returns its numbers and hash.
func marker(t *testing.T, out string) (cut, total int64, unit, sum string) {
	t.Helper()
	m := markerRE.FindAllStringSubmatch(out, -1)
	if len(m) != 1 {
		t.Fatalf("want one clip marker in %.300s…, found %d", out, len(m))
	}
	cut, _ = strconv.ParseInt(m[0][1], 10, 64)
	total, _ = strconv.ParseInt(m[0][2], 10, 64)
	return cut, total, m[0][3], m[0][4]
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestReportClipsLongStrings(t *testing.T) {
	for _, size := range []int{3000, 200 << 10} { // one decoded whole, one streamed
		var text strings.Builder
		for text.Len() < size {
			text.WriteString("line é \"quoted\" \u0001\n")
		}
		orig := text.String()
		in, _ := json.Marshal(map[string]string{"text": orig})
		out, clipped := report(t, in, DefaultBudget)
		if !clipped {
			t.Errorf("%d: clipped = false", size)
		}
		var got map[string]string
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		kept, rest, ok := strings.Cut(got["text"], "…[clipped ")
		if !ok || !strings.HasPrefix(orig, kept) || len(kept) > 2048 || len(kept) < 2000 {
			t.Fatalf("%d: kept %d bytes %.60q…, want a prefix of about 2 KiB of the original", size, len(kept), kept)
		}
		if !utf8.ValidString(kept) || strings.HasSuffix(rest, "]") == false {
			t.Errorf("%d: marker text %q", size, rest)
		}
		cut, total, unit, sum := marker(t, out)
		if unit != "bytes" || total != int64(len(orig)) || cut != int64(len(orig)-len(kept)) || sum != sha([]byte(orig)) {
			t.Errorf("%d: marker says %d of %d %s sha256:%s; want %d of %d bytes sha256:%s",
				size, cut, total, unit, sum, len(orig)-len(kept), len(orig), sha([]byte(orig)))
		}
	}
}

func TestReportClipsLongArraysAndObjects(t *testing.T) {
	var arr bytes.Buffer
	arr.WriteString("[")
	for i := 0; i < 1000; i++ {
		if i > 0 {
			arr.WriteString(", ")
		}
		arr.WriteString(strconv.Itoa(i))
	}
	arr.WriteString("]")
	in := []byte(`{"list": ` + arr.String() + `}`)
	out, clipped := report(t, in, DefaultBudget)
	if !clipped || !strings.HasPrefix(out, `{"list":[0,1,2,`) || !strings.Contains(out, `,99,"…[clipped`) {
		t.Errorf("Report = %.200s…", out)
	}
	if cut, total, unit, sum := marker(t, out); cut != 900 || total != 1000 || unit != "items" || sum != sha(arr.Bytes()) {
		t.Errorf("marker %d of %d %s %s", cut, total, unit, sum)
	}

	var obj bytes.Buffer
	obj.WriteString("{")
	for i := 0; i < 1500; i++ {
		if i > 0 {
			obj.WriteString(",")
		}
		obj.WriteString(`"k` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	obj.WriteString("}")
	out, _ = report(t, obj.Bytes(), DefaultBudget)
	if !strings.Contains(out, `"k999":999,"…":"[clipped 500 of 1500 members sha256:`+sha(obj.Bytes())+`]"}`) {
		t.Errorf("Report = …%s", out[max(0, len(out)-200):])
	}
}

func TestReportClipsBlobs(t *testing.T) {
	data := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("\x89PNG binary\x00\x01"), 5000))
	for name, in := range map[string]string{
		"image":        `{"content":[{"type":"image","data":"` + data + `","mimeType":"image/png"}]}`,
		"type after":   `{"content":[{"data":"` + data + `","mimeType":"audio/wav","type":"audio"}]}`,
		"resource":     `{"type":"resource","resource":{"uri":"file:///a.png","blob":"` + data + `"}}`,
		"base64 alone": `{"payload":"` + data + `"}`,
	} {
		out, clipped := report(t, []byte(in), DefaultBudget)
		if !clipped || len(out) > 400 {
			t.Errorf("%s: Report = %s", name, out)
			continue
		}
		if !strings.Contains(out, `"`+data[:32]+"…[clipped ") {
			t.Errorf("%s: want the first 32 characters kept: %s", name, out)
		}
		if cut, total, unit, sum := marker(t, out); total != int64(len(data)) || cut != total-32 || unit != "bytes" || sum != sha([]byte(data)) {
			t.Errorf("%s: marker %d of %d %s %s", name, cut, total, unit, sum)
		}
	}
	// A short image stays whole; a text item's text is not a blob.
	small := `{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}`
	if out, _ := report(t, []byte(small), DefaultBudget); out != small {
		t.Errorf("Report = %s, want it unchanged", out)
	}
}

// TestReportSecretAcrossTheCut puts a secret where the string limit cuts: none of it may
// survive in the kept prefix.
func TestReportSecretAcrossTheCut(t *testing.T) {
	tok := fake("ghp_", 36)
	pem := "-----BEGIN RSA PRIVATE KEY-----\n" + strings.Repeat("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n", 400) + "-----END RSA PRIVATE KEY-----"
	for _, tc := range []struct{ secret, leak string }{
		{tok, tok[:6]},
		{"password=hunter2hunter2", "hunt"},
		{"https://user:hunter2hunter2@host/", "hunt"},
		{pem, "MIIE"},
	} {
		for off := 2030; off <= 2048; off++ {
			text := strings.Repeat("a", off-1) + " " + tc.secret + " " + strings.Repeat("b", 5000)
			in, _ := json.Marshal(map[string]string{"t": text})
			out, _ := report(t, in, DefaultBudget)
			if strings.Contains(out, tc.leak) {
				t.Fatalf("secret %.20q at %d: output holds %q: …%s", tc.secret, off, tc.leak, out[2000:min(len(out), 2200)])
			}
		}
	}
}

func TestReportClippedIsFalseForRedactionOnly(t *testing.T) {
	if _, clipped := report(t, []byte(`{"password":"`+strings.Repeat("x", 100000)+`"}`), DefaultBudget); clipped {
		t.Error("a redacted value is not clipped")
	}
}

// adversarial inputs for the budget: each must come out valid and within any budget.
func adversarial() map[string][]byte {
	m := map[string][]byte{
		"deep arrays":     []byte(strings.Repeat("[", 100000) + strings.Repeat("]", 100000)),
		"deep objects":    []byte(strings.Repeat(`{"a":`, 50000) + "1" + strings.Repeat("}", 50000)),
		"unclosed deep":   []byte(strings.Repeat("[", 100000)),
		"huge key":        []byte(`{"` + strings.Repeat("k", 1<<20) + `":1}`),
		"huge secret key": []byte(`{"password_` + strings.Repeat("k", 1<<20) + `":1}`),
		"unicode string":  []byte(`"` + strings.Repeat("é😀中", 200000) + `"`),
		"escaped unicode": []byte(`"` + strings.Repeat(`\u00e9\ud83d\ude00\u0001`, 50000) + `"`),
		"long number":     []byte("-" + strings.Repeat("9", 100000) + ".5e10"),
		"many strings":    []byte(`[` + strings.TrimSuffix(strings.Repeat(`"`+strings.Repeat("z", 3000)+`",`, 300), ",") + `]`),
		"wide and deep":   []byte(strings.Repeat(`[[[[`, 5) + strings.TrimSuffix(strings.Repeat(`"`+strings.Repeat("w", 500)+`",`, 200), ",") + strings.Repeat(`]]]]`, 5)),
		"control chars":   []byte(`"` + strings.Repeat(`\u0001`, 100000) + `"`),
		"json in json":    []byte(`"` + strings.Repeat(`[\"`, 1) + strings.Repeat("q", 10000) + `\"]"`),
		"not json":        bytes.Repeat([]byte("\x00\xff<>{"), 100000),
		"whitespace":      append(bytes.Repeat([]byte(" \n"), 100000), '1'),
	}
	var keys bytes.Buffer
	keys.WriteString("{")
	for i := 0; i < 200000; i++ {
		if i > 0 {
			keys.WriteString(",")
		}
		keys.WriteString(`"key` + strconv.Itoa(i) + `":[` + strconv.Itoa(i) + `]`)
	}
	keys.WriteString("}")
	m["many keys"] = keys.Bytes()
	nested := []byte(`{"a":1}`)
	for i := 0; i < 6; i++ {
		q, _ := json.Marshal(string(nested))
		nested = []byte(`{"text":` + string(q) + `,"pad":"` + strings.Repeat("p", 3000) + `"}`)
	}
	m["nested json text"] = nested
	return m
}

func TestReportBudgetAdversarial(t *testing.T) {
	for name, in := range adversarial() {
		for _, budget := range []int{256, 1000, 4096, DefaultBudget} {
			out, clipped := report(t, in, budget)
			if len(in) > budget && !clipped && name != "whitespace" {
				t.Errorf("%s/%d: clipped = false for %d bytes of input: %.100s", name, budget, len(in), out)
			}
		}
	}
}

func TestReportTinyBudgets(t *testing.T) {
	in := []byte(`{"a":"` + strings.Repeat("x", 5000) + `"}`)
	for budget := 1; budget < 300; budget++ {
		report(t, in, budget)
	}
}

// TestReportBig runs the shapes of the 100 MB benchmarks at a size a test can afford,
// checking what the benchmarks don't: the markers' hashes.
func TestReportBig(t *testing.T) {
	img := bigImage(8 << 20)
	out, clipped := report(t, img, DefaultBudget)
	start := bytes.Index(img, []byte(`"data":"`)) + len(`"data":"`)
	data := img[start : start+bytes.IndexByte(img[start:], '"')]
	if _, total, _, sum := marker(t, out); !clipped || total != int64(len(data)) || sum != sha(data) {
		t.Errorf("image: %s", out)
	}

	arr := bigArray(100_000)
	out, _ = report(t, arr, DefaultBudget)
	if cut, total, _, sum := marker(t, out); total != 100_000 || cut != 99_900 || sum != sha(arr) {
		t.Errorf("array: …%s", out[len(out)-150:])
	}

	text := bigText(8 << 20)
	out, _ = report(t, text, DefaultBudget)
	var got struct{ Content []struct{ Text string } }
	if err := json.Unmarshal(text, &got); err != nil {
		t.Fatal(err)
	}
	orig := got.Content[0].Text
	if _, total, _, sum := marker(t, out); total != int64(len(orig)) || sum != sha([]byte(orig)) {
		t.Errorf("text: %.300s", out)
	}
}

// TestReportNeverClipsToGrow: a cut that would save less than its marker costs is not
// made, at any budget level.
func TestReportNeverClipsToGrow(t *testing.T) {
	for _, in := range []string{
		`[` + strings.TrimSuffix(strings.Repeat("1,", 101), ",") + `]`, // 101 items, a few bytes past the limit
		`{"s":"` + strings.Repeat("x", 2100) + `"}`,                    // 52 bytes past 2 KiB
		`{"n":` + strings.Repeat("7", 100) + `}`,                       // a long but sane number
		`{"img":{"type":"image","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="}}`,
	} {
		if out, clipped := report(t, []byte(in), DefaultBudget); clipped || out != in {
			t.Errorf("Report(%.60s…) = %.80s…, clipped %v; want it unchanged", in, out, clipped)
		}
	}
	// Small containers past the depth limit are shown, not replaced by a bigger marker.
	deep := strings.Repeat("[", 40) + strings.Repeat("]", 40)
	if out, clipped := report(t, []byte(deep), DefaultBudget); clipped || out != deep {
		t.Errorf("Report(%s) = %s, clipped %v", deep, out, clipped)
	}
}
