package redact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzReport: whatever the bytes and whatever the budget (from 256 up), Report must not
// panic, must return valid JSON with no raw line break, and must stay within the
// budget; a Redactor used before must give the same bytes.
func FuzzReport(f *testing.F) {
	seeds := reportSeeds()
	for _, s := range seeds {
		f.Add([]byte(s), uint16(0))
		f.Add([]byte(s), uint16(40))
	}
	f.Fuzz(func(t *testing.T, in []byte, extra uint16) {
		budget := 256 + int(extra)
		out, clipped := Report(in, budget)
		if again, c := usedRedactor().Report(in, budget); string(again) != string(out) || c != clipped {
			t.Fatalf("Report(%q, %d) = %q, but a reused Redactor gives %q", in, budget, out, again)
		}
		if !json.Valid(out) {
			t.Fatalf("Report(%q, %d) = %q: not valid JSON", in, budget, out)
		}
		if bytes.ContainsAny(out, "\r\n") {
			// report.Step.RawChecked copies this into a journal line unchecked.
			t.Fatalf("Report(%q, %d) = %q: a raw line break", in, budget, out)
		}
		if len(out) > budget {
			t.Fatalf("Report(%q, %d): %d bytes, over the budget", in, budget, len(out))
		}
	})
}

// reportSeeds are inputs worth starting a fuzz of Report from.
func reportSeeds() []string {
	return []string{
		`{"a":1}`, `[1,2,3]`, `"text"`, `null`, ``, `{"password":"x","url":"https://u:p@h/?key=k"}`,
		`{"content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]}`,
		`"{\"token\":\"t\",\"a\":[1,2]}"`, `["--password","x"]`, `[{"name":"API_KEY","value":"v"}]`,
		`[["X-Api-Key","v"],["a","b"]]`, `["mysql","-p","pw","-p","5432"]`,
		`{"a":"\ud83d\ude00\u0000"}`, "{\"a\":\"\xff\"}", `-0.5e-10`, `{"a":[[[[{}]]]]}`,
		"-----BEGIN RSA PRIVATE KEY-----\nabc", `{"a":1}x`, `[1,]`,
		`"` + strings.Repeat("b", 3000) + `"`, `[` + strings.Repeat(`1,`, 200) + `1]`,
	}
}

// FuzzText: Text never panics, and is idempotent (a redacted text has nothing left to
// redact, so reports of reports don't drift).
func FuzzText(f *testing.F) {
	for _, s := range []string{
		"postgres://app:pw@db/x", "Authorization: Bearer abc.def-123", "export GITHUB_TOKEN=x && y",
		`{"password": "a\"b", "n": 1}`, "--token v --x", "-----BEGIN RSA PRIVATE KEY-----\nabc",
		"https://h/?key=v&sig=s#access_token=t", "u:p@tcp(h)/d", "aws " + fake("", 40),
		fake("ghp_", 36), fake("eyJ", 12) + "." + fake("", 8) + "." + fake("", 8),
		"mysql -u root -p hunter2 db", "mkdir -p x && psql -p 5432", "-p -p a-p b", "-p mkdir -p A",
		"my password is hunter2.", "the token is invalid", "aws secret is [REDACTED] ok",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := Text(s)
		if twice := Text(once); twice != once {
			t.Fatalf("Text(%q) = %q, then %q", s, once, twice)
		}
	})
}

// FuzzCommandLine: whatever the arguments around it, CommandLine never panics, never
// changes how many arguments there are, and a known secret passed in any of the shapes
// servers are given their keys in never survives.
func FuzzCommandLine(f *testing.F) {
	for _, s := range []string{
		"", "npx\x00-y\x00server", "--token", "-p", "--password\x00--token", "sh\x00-c\x00mysql -p x",
		"a=b\x00--auth", "postgres://u:p@h\x00-p\x005432", "--api-key\x00${K}", "\x00\x00-",
	} {
		f.Add(s, uint8(0), uint8(0))
		f.Add(s, uint8(3), uint8(1))
	}
	const secret = "Zq9xK2mPv7Lw4"
	anthropic := fake("sk-ant-api03-", 90)
	shapes := [][]string{
		{anthropic},
		{"--password", secret},
		{"-password", secret},
		{"-p", secret},
		{"--token=" + secret},
		{"GITHUB_TOKEN=" + secret},
		{"postgresql://app:" + secret + "@db:5432/app"},
		{"--api-key", secret},
		{"-e", "API_KEY=" + secret},
	}
	f.Fuzz(func(t *testing.T, args string, shape, at uint8) {
		argv := strings.Split(args, "\x00")
		sh := shapes[int(shape)%len(shapes)]
		pos := int(at) % (len(argv) + 1)
		argv = append(argv[:pos:pos], append(append([]string(nil), sh...), argv[pos:]...)...)
		out := CommandLine(argv)
		if len(out) != len(argv) {
			t.Fatalf("CommandLine(%q) has %d arguments, want %d", argv, len(out), len(argv))
		}
		for _, a := range out {
			if strings.Contains(a, secret) || strings.Contains(a, anthropic[13:]) {
				t.Fatalf("CommandLine(%q) = %q: the secret survived", argv, out)
			}
		}
	})
}
