package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The remote-upstream workloads (-only http): bir-proxy --url against a local
// Streamable HTTP server (the rawhttp fixture, JSON answers, session era), beside a
// minimal stdio→HTTP bridge (httpBridge) in the same run.

// httpBridge is the floor for any stdio→HTTP wrapper: one POST per line, a keep-alive
// pool, the session id carried, each answer body written as a line. It reads nothing
// of what it carries but the session id header.
func httpBridge(args []string) int {
	if path := os.Getenv("BIR_CPUPROFILE"); path != "" { // -profile http-bridge
		f := must(os.Create(path))
		check(pprof.StartCPUProfile(f))
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	url := args[0]
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 64}}
	var sid atomic.Value
	var mu sync.Mutex
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	var wg sync.WaitGroup
	for {
		line, err := in.ReadBytes('\n')
		if body := bytes.TrimSpace(line); len(body) > 0 {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if s, _ := sid.Load().(string); s != "" {
					req.Header.Set("Mcp-Session-Id", s)
				}
				resp, err := client.Do(req)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
					sid.Store(s)
				}
				b, _ := io.ReadAll(resp.Body)
				if len(b) == 0 {
					return
				}
				mu.Lock()
				out.Write(b)
				out.WriteByte('\n')
				out.Flush()
				mu.Unlock()
			})
		}
		if err != nil {
			break
		}
	}
	wg.Wait()
	return 0
}

// httpServer is a running rawhttp.
type httpServer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	url string
}

func startHTTPServer(bin string, args ...string) *httpServer {
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	in := must(cmd.StdinPipe())
	out := must(cmd.StdoutPipe())
	check(cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	check(err)
	return &httpServer{cmd: cmd, in: in, url: strings.TrimSpace(line)}
}

func (s *httpServer) stop() {
	s.in.Close()
	_ = s.cmd.Wait()
}

// httpParts is which of the remote workloads to run: "http" is all of them.
func httpParts(want func(string) bool) map[string]bool {
	parts := map[string]bool{}
	for _, p := range []string{"seq", "pipe", "big"} {
		if want("http") || want("http-"+p) {
			parts[p] = true
		}
	}
	return parts
}

func httpWorkloads(bins map[string]string, parts map[string]bool, n, pipeN, bigMB int, gap time.Duration, profile, mcpRemote, also string) {
	srv := startHTTPServer(bins["rawhttp"], "--reply-size", strconv.Itoa(bigMB<<20))
	defer srv.stop()
	rss := map[string]*int64{}
	variants := []variant{
		{name: "http-bridge", argv: []string{bins["bench"], "http-bridge", srv.url}},
		{name: "bir-proxy/url", argv: []string{bins["bir-proxy"], "--server", "bench", "--url", srv.url}, env: []string{"BIR_OFF=1"}},
	}
	if also != "" {
		variants = append(variants, variant{name: "bir-proxy/also", argv: []string{also, "--server", "bench", "--url", srv.url}, env: []string{"BIR_OFF=1"}})
	}
	if mcpRemote != "" {
		variants = append(variants, mcpRemoteVariant(mcpRemote, srv.url))
	}
	for i, v := range variants {
		if v.name == profile || profile == "all" {
			variants[i].env = append(slices.Clone(v.env), "BIR_CPUPROFILE="+filepath.Join(must(os.Getwd()), "bench-"+strings.ReplaceAll(v.name, "/", "_")+".prof"))
		}
		rss[v.name] = new(int64)
		variants[i].seqRSS = rss[v.name]
	}
	bridge, proxy := variants[0].name, variants[1].name
	vsAlso := func(what string, f func(name string) float64) {
		if also != "" {
			fmt.Printf("  %-24s %.2fx bir-proxy/also's %s\n", proxy, f(proxy)/f("bir-proxy/also"), what)
		}
	}
	vsPeer := func(what string, f func(name string) float64) {
		if mcpRemote != "" {
			fmt.Printf("  %-24s %.2fx mcp-remote's %s\n", proxy, f(proxy)/f("mcp-remote"), what)
		}
	}

	if parts["seq"] {
		fmt.Printf("Remote upstream (Streamable HTTP, JSON answers) — sequential tools/call round trips (%d each, interleaved in rounds):\n", n)
		res := sequentialRounds(variants, n, 10, gap)
		for _, v := range variants {
			fmt.Printf("  %-24s p50 %8s  p99 %8s  peak RSS %5.1f MiB\n", v.name, res[v.name][0], res[v.name][1], float64(*rss[v.name])/(1<<20))
		}
		fmt.Printf("  %-24s p50 %.2fx  p99 %.2fx  the bridge\n", proxy, ratio(res[proxy][0], res[bridge][0]), ratio(res[proxy][1], res[bridge][1]))
		vsAlso("p50", func(v string) float64 { return float64(res[v][0]) })
		if also != "" {
			fmt.Printf("  %-24s p50 %.2fx  p99 %.2fx  the bridge\n", "bir-proxy/also", ratio(res["bir-proxy/also"][0], res[bridge][0]), ratio(res["bir-proxy/also"][1], res[bridge][1]))
		}
		vsPeer("p50", func(v string) float64 { return float64(res[v][0]) })
		vsPeer("p99", func(v string) float64 { return float64(res[v][1]) })
		vsPeer("peak RSS", func(v string) float64 { return float64(*rss[v]) })
		fmt.Println()
	}

	if parts["pipe"] {
		fmt.Printf("Remote upstream — 32 tools/call in flight (%d messages, interleaved in rounds):\n", pipeN)
		tput := map[string]float64{}
		cpu := map[string]time.Duration{}
		const rounds = 6 // even: each variant as often early in a round as late (roundOrder)
		for round := range rounds {
			for _, i := range roundOrder(len(variants), round) {
				v := variants[i]
				r, c := pipelined(v, pipeN/rounds, 32)
				tput[v.name] += r / rounds
				cpu[v.name] += c
			}
		}
		for _, v := range variants {
			fmt.Printf("  %-24s %10.0f msg/s  CPU/msg %s\n", v.name, tput[v.name], (cpu[v.name] / time.Duration(pipeN/rounds*rounds)).Round(100*time.Nanosecond))
		}
		fmt.Printf("  %-24s %.2fx the bridge's throughput\n", proxy, tput[proxy]/tput[bridge])
		if also != "" {
			fmt.Printf("  %-24s %.2fx the bridge's throughput\n", "bir-proxy/also", tput["bir-proxy/also"]/tput[bridge])
		}
		vsPeer("throughput", func(v string) float64 { return tput[v] })
		fmt.Println()
	}

	if parts["big"] {
		fmt.Printf("Remote upstream — one %d MiB tools/call answer (median of 3):\n", bigMB)
		took := map[string]time.Duration{}
		hwm := map[string]int64{}
		for _, v := range variants {
			d, m := bigAnswer(v, bigMB<<20, 3)
			took[v.name], hwm[v.name] = d, m
			fmt.Printf("  %-24s %8s  peak RSS %d MiB (%.2fx the answer)\n", v.name, d.Round(time.Millisecond), m>>20, float64(m)/float64(bigMB<<20))
		}
		fmt.Printf("  %-24s %.2fx the bridge\n", proxy, ratio(took[proxy], took[bridge]))
		vsPeer("time", func(v string) float64 { return float64(took[v]) })
		vsPeer("peak RSS", func(v string) float64 { return float64(hwm[v]) })
		fmt.Println()
	}
}

// mcpRemoteVariant is mcp-remote (npm), the stdio→remote peer most hosts use today,
// against url: Streamable HTTP only (as bir-proxy is given), its logs off (it writes
// every message to stderr by default; silent is the cheaper setting for it), its
// OAuth state in a directory of its own (the fixture asks for no sign-in). spec is
// the path of its dist/proxy.js, or a version to install into the user cache
// directory with npm, once.
func mcpRemoteVariant(spec, url string) variant {
	script := spec
	if _, err := os.Stat(spec); err != nil {
		dir := filepath.Join(must(os.UserCacheDir()), "bir-bench", "mcp-remote-"+spec)
		script = filepath.Join(dir, "node_modules", "mcp-remote", "dist", "proxy.js")
		if _, err := os.Stat(script); err != nil {
			fmt.Fprintf(os.Stderr, "installing mcp-remote@%s into %s\n", spec, dir)
			check(os.MkdirAll(dir, 0o755))
			cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--no-save", "--prefix", dir, "mcp-remote@"+spec)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				log.Fatalf("npm install mcp-remote@%s: %v", spec, err)
			}
		}
	}
	cfg := must(os.MkdirTemp("", "bir-bench-mcp-remote-"))
	return variant{
		name:  "mcp-remote",
		argv:  []string{"node", script, url, "--transport", "http-only", "--silent"},
		env:   []string{"MCP_REMOTE_CONFIG_DIR=" + cfg},
		quiet: true,
	}
}

// bigAnswer asks for the server's --reply-size answer runs times and returns the
// median time from the request to the whole answer, and the process's peak RSS.
func bigAnswer(v variant, size, runs int) (time.Duration, int64) {
	p := start(v)
	defer p.stop()
	initialize(p)
	ds := bigCalls(p, v.name, size, runs)
	slices.Sort(ds)
	return ds[len(ds)/2], procStatus(p.cmd.Process.Pid, "VmHWM")
}
