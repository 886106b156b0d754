package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/oauthtest"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// BenchmarkOAuthVsHeader: with a valid stored token, `--url` startup (process start
// to the initialize answer) and sequential tools/call latency, against the same
// proxy given the same token as a static --header, interleaved in one run against
// one fixture (which checks the token either way). Reported as p50s and the ratio
// oauth/header; the ratio is what docs/PERFORMANCE.md quotes.
//
//	go test ./cmd/bir-proxy -run XXX -bench OAuthVsHeader -benchtime 200x
func BenchmarkOAuthVsHeader(b *testing.B) {
	srv := oauthtest.Start(b, oauthtest.Options{MetadataInHeader: true, DCR: true})
	bin := testutil.Build(b, "./cmd/bir-proxy")
	config := b.TempDir()
	port := strconv.Itoa(benchPort(b))
	env := append(os.Environ(), "XDG_CONFIG_HOME="+config, "BIR_OFF=1", "XDG_STATE_HOME="+b.TempDir(),
		"BROWSER="+testutil.Build(b, "./internal/oauthtest/fakebrowser"))
	login := exec.Command(bin, "login", "--url", srv.MCPURL, "--oauth-port", port)
	login.Env = env
	if out, err := login.CombinedOutput(); err != nil {
		b.Fatalf("login: %v: %s", err, out)
	}
	token := storedToken(b, config)
	base := []string{"--server", "fx", "--url", srv.MCPURL, "--transport", "http", "--oauth-port", port}
	variants := map[string][]string{
		"header": append(slices.Clone(base), "--header", "Authorization: Bearer "+token),
		"oauth":  base,
	}
	start := func(args []string) (*testutil.Proc, *framing.Reader) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(env, "BROWSER=false") // a sign-in would be a failure here
		p := testutil.Start(b, cmd)
		return p, framing.NewReader(p.Stdout)
	}
	recv := func(p *testutil.Proc, r *framing.Reader) string {
		m, err := r.Read()
		if err != nil {
			b.Fatalf("read: %v (stderr %s)", err, p.Stderr.String())
		}
		return string(m)
	}
	b.Run("startup", func(b *testing.B) {
		times := map[string][]time.Duration{}
		for i := 0; i < b.N; i++ {
			for _, name := range order(i) {
				t0 := time.Now()
				p, r := start(variants[name])
				p.Send(oauthInit)
				if got := recv(p, r); !gjson.Get(got, "result").Exists() {
					b.Fatalf("%s: %s", name, got)
				}
				times[name] = append(times[name], time.Since(t0))
				p.Stdin.Close()
				p.Wait()
			}
		}
		reportRatio(b, times)
	})
	b.Run("call", func(b *testing.B) {
		procs := map[string]*testutil.Proc{}
		readers := map[string]*framing.Reader{}
		for name, args := range variants {
			p, r := start(args)
			p.Send(oauthInit)
			recv(p, r)
			p.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			procs[name], readers[name] = p, r
		}
		times := map[string][]time.Duration{}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for _, name := range order(i) {
				t0 := time.Now()
				procs[name].Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, i+1))
				if got := recv(procs[name], readers[name]); !gjson.Get(got, "result").Exists() {
					b.Fatalf("%s: %s", name, got)
				}
				times[name] = append(times[name], time.Since(t0))
			}
		}
		b.StopTimer()
		for _, p := range procs {
			p.Stdin.Close()
			p.Wait()
		}
		reportRatio(b, times)
	})
	if c := srv.Counts(); c.Authorizes != 1 || c.Refreshes != 0 {
		b.Errorf("counts %+v: the benchmark must run on the stored token alone", c)
	}
}

func benchPort(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// storedToken reads the access token login stored (the benchmark's static header).
func storedToken(b *testing.B, config string) string {
	files, _ := filepath.Glob(filepath.Join(config, "bir-proxy", "oauth", "*.json"))
	if len(files) != 1 {
		b.Fatalf("stored grants: %q", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		b.Fatal(err)
	}
	var e struct {
		Token struct {
			AccessToken string `json:"access_token"`
		} `json:"token"`
	}
	if err := json.Unmarshal(data, &e); err != nil || e.Token.AccessToken == "" {
		b.Fatalf("the stored grant: %v", err)
	}
	return e.Token.AccessToken
}

// order alternates which variant goes first, so neither gains from going second
// (a warm cache, the other's exit still under way).
func order(i int) []string {
	if i%2 == 0 {
		return []string{"header", "oauth"}
	}
	return []string{"oauth", "header"}
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func reportRatio(b *testing.B, times map[string][]time.Duration) {
	h, o := p50(times["header"]), p50(times["oauth"])
	b.ReportMetric(float64(h.Microseconds()), "header-p50-µs")
	b.ReportMetric(float64(o.Microseconds()), "oauth-p50-µs")
	b.ReportMetric(float64(o)/float64(h), "oauth/header")
}
