package redact

import (
	"encoding/base64"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fake returns prefix followed by n generated characters of a token alphabet (mixed
// case and digits), so that no real-looking secret is written out in this file.
func fake(prefix string, n int) string {
	const alpha = "aB3dE5gH7jK9mN1pQ2sT4vW6yZ8"
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < n; i++ {
		b.WriteByte(alpha[(i*7+3)%len(alpha)])
	}
	return b.String()
}

type textCase struct {
	name   string
	in     string
	gone   []string // must not appear in Text(in)
	kept   []string // must appear in Text(in)
	intact bool     // Text(in) must equal in
}

func checkText(t *testing.T, cases []textCase) {
	t.Helper()
	for _, c := range cases {
		got := Text(c.in)
		if c.intact && got != c.in {
			t.Errorf("%s: Text(%q) = %q, want it unchanged", c.name, c.in, got)
		}
		for _, g := range c.gone {
			if strings.Contains(got, g) {
				t.Errorf("%s: Text(%q) = %q still holds %q", c.name, c.in, got, g)
			}
		}
		for _, k := range c.kept {
			if !strings.Contains(got, k) {
				t.Errorf("%s: Text(%q) = %q lost %q", c.name, c.in, got, k)
			}
		}
		if again := Text(got); again != got {
			t.Errorf("%s: Text is not idempotent: %q then %q", c.name, got, again)
		}
	}
}

func TestTextTokenShapes(t *testing.T) {
	shapes := []string{
		fake("ghp_", 36), fake("gho_", 36), fake("ghs_", 36), fake("ghu_", 36), fake("ghr_", 36),
		fake("github_pat_", 82),
		fake("glpat-", 20),
		fake("xoxb-", 40), fake("xoxp-", 50), fake("xoxa-", 30), fake("xapp-", 40),
		"AKIA" + "IOSFODNN7EXAMPL1", "ASIA" + "Q3EGRZSXWKC7PJLU",
		fake("sk-", 48), fake("sk-proj-", 40), fake("sk-ant-api03-", 90),
		fake("sk_live_", 24), fake("rk_live_", 24), fake("sk_test_", 24), fake("whsec_", 32),
		fake("AIza", 35), fake("ya29.", 60),
		fake("npm_", 36), fake("hf_", 34), fake("pypi-", 60),
		fake("eyJ", 30) + "." + fake("eyJ", 40) + "." + fake("", 43),
	}
	var cases []textCase
	for _, s := range shapes {
		cases = append(cases,
			textCase{name: s[:5] + " alone", in: s, gone: []string{s}},
			textCase{name: s[:5] + " in prose", in: "use (" + s + ") to push", gone: []string{s}, kept: []string{"use (", ") to push"}},
			textCase{name: s[:5] + " in a line", in: "x\n" + s + "\ny", gone: []string{s}, kept: []string{"x\n", "\ny"}},
		)
	}
	checkText(t, cases)
}

func TestTextAWSSecretNeedsAWSWord(t *testing.T) {
	s := fake("", 39) + "/"
	checkText(t, []textCase{
		{name: "near aws", in: "aws secret is " + s + " ok", gone: []string{s}, kept: []string{"ok"}},
		{name: "near key id", in: "AKIA" + "IOSFODNN7EXAMPL1 " + s, gone: []string{s}},
		{name: "no aws word", in: "commit " + s + " ok", intact: true},
		{name: "hex sha is not mixed", in: "aws commit " + strings.Repeat("ab12", 10), intact: true},
	})
}

func TestTextNearMissesStay(t *testing.T) {
	checkText(t, []textCase{
		{name: "short ghp", in: "ghp_short and gho_", intact: true},
		{name: "words with sk-", in: "risk-assessment-framework-overview and sk-learn-compatible-estimators", intact: true},
		{name: "hf_ in words", in: "hf_hub_download_function_name_really_long", intact: true},
		{name: "bearer in prose", in: "the bearer of bad news, the Bearer instrument", intact: true},
		{name: "basic in prose", in: "basic information about Basic authentication", intact: true},
		{name: "max_tokens", in: "max_tokens=4096 keyword: value", intact: true},
		{name: "eyJ alone", in: "eyJhbGciOiJIUzI1NiJ9 is a header only", intact: true},
		{name: "public key", in: "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqh\n-----END PUBLIC KEY-----", intact: true},
		{name: "url without password", in: "ssh://git@github.com/org/repo and https://example.com/a:b@c", intact: true},
		{name: "host and port", in: "postgres://db.internal:5432/app?sslmode=require", intact: true},
		{name: "comparison", in: "if password == expected { ok }", intact: true},
		{name: "url user only", in: "https://alice@example.com/x", intact: true},
		{name: "time", in: "token:12:30", intact: true},
		{name: "variable reference", in: "Authorization: Bearer ${LINEAR_TOKEN}\nGITHUB_TOKEN=$GITHUB_TOKEN", intact: true},
		{name: "already redacted", in: "password=" + Redacted + " and https://u:" + Redacted + "@h", intact: true},
	})
}

func TestTextURLs(t *testing.T) {
	checkText(t, []textCase{
		{name: "postgres", in: "postgres://app:S3cr3tPass@db.internal:5432/app", gone: []string{"S3cr3tPass"}, kept: []string{"postgres://app:", "@db.internal:5432/app"}},
		{name: "https basic", in: "see https://alice:hunter2@example.com/path.", gone: []string{"hunter2"}, kept: []string{"alice", "example.com/path"}},
		{name: "mongodb+srv", in: "mongodb+srv://root:p%40ss%2Fw0rd@cluster0.x.mongodb.net/db?retryWrites=true", gone: []string{"p%40ss"}, kept: []string{"cluster0.x.mongodb.net/db?retryWrites=true"}},
		{name: "redis no user", in: "redis://:r3disPw@cache:6379/0", gone: []string{"r3disPw"}, kept: []string{"redis://:", "@cache:6379/0"}},
		{name: "amqp", in: `"amqp://guest:gu3st@rabbit:5672/vhost"`, gone: []string{"gu3st"}, kept: []string{"rabbit:5672/vhost"}},
		{name: "raw @ in password", in: "mysql://u:p@ss@db/x", gone: []string{"p@ss"}, kept: []string{"@db/x"}},
		{name: "raw / in password", in: "postgres://u:pa/ss@db/x", gone: []string{"pa/ss"}, kept: []string{"@db/x"}},
		{name: "token as user", in: "https://" + fake("", 30) + "@github.com/o/r.git", gone: []string{fake("", 30)}, kept: []string{"@github.com/o/r.git"}},
		{name: "go mysql dsn", in: "dsn user:my5qlPw@tcp(127.0.0.1:3306)/app", gone: []string{"my5qlPw"}, kept: []string{"user:", "@tcp(127.0.0.1:3306)/app"}},
		{name: "two urls", in: "a=https://x:1secret@h1/ b=ftp://y:2secret@h2/", gone: []string{"1secret", "2secret"}, kept: []string{"@h1/", "@h2/"}},
	})
}

func TestTextQueryParams(t *testing.T) {
	checkText(t, []textCase{
		{name: "access_token", in: "https://api.example.com/v1/items?access_token=tok_ABC123xyz&limit=5", gone: []string{"tok_ABC123xyz"}, kept: []string{"api.example.com", "limit=5"}},
		{name: "key", in: "https://maps.example.com/api?q=paris&key=K3yValue123#top", gone: []string{"K3yValue123"}, kept: []string{"q=paris", "#top"}},
		{name: "sig", in: "https://acct.blob.example.net/c/b?sv=2020&sig=Zm9vYmFy%2B&se=2025", gone: []string{"Zm9vYmFy"}, kept: []string{"sv=2020", "se=2025"}},
		{name: "X-Amz", in: "https://b.s3.amazonaws.com/k?X-Amz-Credential=AK%2F2024&X-Amz-Signature=abcdef0123&X-Amz-Expires=60", gone: []string{"AK%2F2024", "abcdef0123"}, kept: []string{"X-Amz-Expires=60"}},
		{name: "fragment", in: "https://app/cb#access_token=fr4gT0k&state=xyz", gone: []string{"fr4gT0k"}, kept: []string{"state=xyz"}},
		{name: "key in prose is not a param", in: "sort key=name", intact: true},
	})
}

func TestTextAssignmentsAndHeaders(t *testing.T) {
	basic := base64.StdEncoding.EncodeToString([]byte("aladdin:opensesame"))
	checkText(t, []textCase{
		{name: "export", in: "export GITHUB_TOKEN=abc123def && make", gone: []string{"abc123def"}, kept: []string{"export GITHUB_TOKEN=" + Redacted, "&& make"}},
		{name: "quoted", in: `API_KEY="a b c" next`, gone: []string{"a b c"}, kept: []string{`API_KEY="` + Redacted + `" next`}},
		{name: "yaml", in: "db:\n  password: hunter2\n  user: bob", gone: []string{"hunter2"}, kept: []string{"user: bob"}},
		{name: "json text", in: `{"user": "bob", "client_secret": "s3cr3t", "n": 1}`, gone: []string{"s3cr3t"}, kept: []string{`"user": "bob"`, `"n": 1`}},
		{name: "json nested", in: `{"auth": {"u": "x", "p": "y"}, "n": 1}`, gone: []string{`"p": "y"`}, kept: []string{`"n": 1`}},
		{name: "escaped quote", in: `"password": "a\"b", "x": 1`, gone: []string{`a\"b`}, kept: []string{`"x": 1`}},
		{name: "header bearer", in: "Authorization: Bearer abc.def.ghi-secret-token", gone: []string{"abc.def.ghi-secret-token"}, kept: []string{"Authorization: Bearer "}},
		{name: "header token", in: `curl -H "Authorization: token gh0tok3n" https://x`, gone: []string{"gh0tok3n"}, kept: []string{"Authorization: token ", `" https://x`}},
		{name: "header basic", in: "Authorization: Basic " + basic, gone: []string{basic}, kept: []string{"Basic "}},
		{name: "bare basic", in: "send Basic " + basic + " along", gone: []string{basic}, kept: []string{"along"}},
		{name: "bare bearer", in: "use bearer abcdef12345 here", gone: []string{"abcdef12345"}, kept: []string{"here"}},
		{name: "cookie header", in: "Cookie: session=9f8e7d6c5b4a; theme=dark", gone: []string{"9f8e7d6c5b4a"}, kept: []string{"Cookie: "}},
		{name: "connection string", in: "Server=db;User Id=sa;Password=Pa55w0rd;Database=app", gone: []string{"Pa55w0rd"}, kept: []string{"Database=app"}},
		{name: "flag equals", in: "tool --api-key=k3y123 --verbose", gone: []string{"k3y123"}, kept: []string{"--verbose"}},
		{name: "flag space", in: "tool --password hunter2 --verbose", gone: []string{"hunter2"}, kept: []string{"--password ", "--verbose"}},
		{name: "flag quoted", in: `tool --token "two words" x`, gone: []string{"two words"}, kept: []string{" x"}},
		{name: "spaces around =", in: "aws_secret_access_key = wJalrXUtnFEMIK7MDENG", gone: []string{"wJalrXUtnFEMIK7MDENG"}},
	})
}

func TestTextPEM(t *testing.T) {
	body := "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"
	checkText(t, []textCase{
		{name: "rsa", in: "key:\n-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n-----END RSA PRIVATE KEY-----\ndone", gone: []string{"MIIEvQ", "b3BlbnNz"}, kept: []string{"-----BEGIN RSA PRIVATE KEY-----\n", "\n-----END RSA PRIVATE KEY-----\ndone"}},
		{name: "pkcs8 one line", in: `-----BEGIN PRIVATE KEY-----\n` + strings.ReplaceAll(body, "\n", `\n`) + `\n-----END PRIVATE KEY-----`, gone: []string{"MIIEvQ"}},
		{name: "unterminated", in: "-----BEGIN OPENSSH PRIVATE KEY-----\n" + body, gone: []string{"MIIEvQ", "b3BlbnNz"}, kept: []string{"-----BEGIN OPENSSH PRIVATE KEY-----"}},
		{name: "pgp", in: "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n" + body + "\n-----END PGP PRIVATE KEY BLOCK-----", gone: []string{"MIIEvQ"}},
	})
}

// nearMisses are the units of texts made of many almost-secrets, each a way into a
// rule's slow path.
var nearMisses = []string{"eyJ-", "sk-a-", "a://", "token: ", "x=", "--password ", "Bearer ", "@tcp(", "-----BEGIN "}

// growth runs f on unit repeated to about n and to about factor*n bytes and returns how
// much longer the larger input took and how many more bytes it allocated. Each figure
// is the least of several runs, the two sizes taking turns, so that a busy spell of a
// shared machine does not fall on one size only; only ratios are compared, never
// wall-clock figures.
func growth(f func(string), unit string, n, factor int) (timeRatio, allocRatio float64) {
	small := strings.Repeat(unit, n/len(unit))
	large := strings.Repeat(unit, factor*n/len(unit))
	type cost struct {
		took  time.Duration
		alloc uint64
	}
	best := [2]cost{{math.MaxInt64, math.MaxUint64}, {math.MaxInt64, math.MaxUint64}}
	var before, after runtime.MemStats
	for range 7 {
		for i, in := range []string{small, large} {
			runtime.ReadMemStats(&before)
			start := time.Now()
			f(in)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			best[i].took = min(best[i].took, max(took, time.Nanosecond))
			best[i].alloc = min(best[i].alloc, after.TotalAlloc-before.TotalAlloc)
		}
	}
	timeRatio = float64(best[1].took) / float64(best[0].took)
	if best[0].alloc > 0 {
		allocRatio = float64(best[1].alloc) / float64(best[0].alloc)
	}
	return timeRatio, allocRatio
}

// Linear work grows 8 times for 8 times the input, quadratic work 64 times; the bound
// sits between, with room for a noisy machine.
const (
	growthInput  = 32 << 10
	growthFactor = 8
	growthBound  = 32.0
)

// TestTextLinear guards the near-miss paths: texts made of many almost-secrets must not
// take quadratic time or memory (a pass over 1 MB of them would never end otherwise).
func TestTextLinear(t *testing.T) {
	for _, unit := range nearMisses {
		t.Run(strings.TrimSpace(unit), func(t *testing.T) {
			tr, ar := growth(func(s string) { _ = Text(s) }, unit, growthInput, growthFactor)
			t.Logf("%d times the input: %.1f times the time, %.1f times the bytes allocated", growthFactor, tr, ar)
			if tr > growthBound {
				t.Errorf("Text on %d times the input took %.1f times as long (linear: about %d)", growthFactor, tr, growthFactor)
			}
			if ar > growthBound {
				t.Errorf("Text on %d times the input allocated %.1f times as much (linear: about %d)", growthFactor, ar, growthFactor)
			}
		})
	}
}

// TestGrowthSeesQuadratic proves TestTextLinear's measure tells a quadratic pass from a
// linear one: a check that passed everything would guard nothing.
func TestGrowthSeesQuadratic(t *testing.T) {
	quadratic := func(s string) {
		for i := 0; i < len(s); i += 64 { // rescans the rest of the text from every 64th byte
			_ = strings.IndexByte(s[i:], 0)
		}
	}
	tr, _ := growth(quadratic, "x=", growthInput, growthFactor)
	t.Logf("quadratic: %.1f times the time", tr)
	if tr <= growthBound {
		t.Errorf("a quadratic pass on %d times the input took only %.1f times as long; the bound %.0f would let it through", growthFactor, tr, growthBound)
	}
	linear := func(s string) { _ = strings.IndexByte(s, 0) }
	tr, _ = growth(linear, "x=", growthInput, growthFactor)
	t.Logf("linear: %.1f times the time", tr)
	if tr > growthBound {
		t.Errorf("a linear pass on %d times the input took %.1f times as long; the bound %.0f would fail it", growthFactor, tr, growthBound)
	}
}

func BenchmarkTextNearMisses(b *testing.B) {
	for _, unit := range nearMisses {
		in := strings.Repeat(unit, (1<<20)/len(unit))
		b.Run(strings.TrimSpace(unit), func(b *testing.B) {
			for b.Loop() {
				_ = Text(in)
			}
		})
	}
}
