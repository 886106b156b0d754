package main

import (
	"bytes"
	"fmt"
	"log"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The large-result workload (-only result) and issue 26's table: a small tools/call
// whose result is N MiB (the raw fixture's --reply-size), the shape of an image, a
// file's contents or a resource read, where `big` echoes one message both ways.

// resultSample is one variant's figures for one result size.
type resultSample struct {
	perCall time.Duration // median time from the request to the whole answer
	rssOver float64       // (peak RSS - idle RSS) / the result's size, median of the rounds (0: not measured)
}

// resultRuns is how many calls one process makes for a result of mb MiB: enough for
// a median at 1 MiB, one at 64 MiB (each round is a fresh process, so the peak RSS of
// every round is a first call's).
func resultRuns(mb int) int { return max(1, 16/mb) }

// resultWorkload measures every variant with results of each size, rounds times,
// interleaved (roundOrder) so the machine's noise falls on all alike.
func resultWorkload(vs []variant, sizesMB []int, rounds int) map[int]map[string]resultSample {
	return sizeWorkload(vs, sizesMB, rounds, resultCalls)
}

// sizeWorkload is resultWorkload for any sized call: calls(v, size, runs) returns
// each call's time, the idle RSS and the peak RSS.
func sizeWorkload(vs []variant, sizesMB []int, rounds int, calls func(variant, int, int) ([]time.Duration, int64, int64)) map[int]map[string]resultSample {
	out := map[int]map[string]resultSample{}
	for _, mb := range sizesMB {
		size := mb << 20
		times := map[string][]time.Duration{}
		over := map[string][]float64{}
		for r := range rounds {
			for _, i := range roundOrder(len(vs), r) {
				v := vs[i]
				ds, idleRSS, peak := calls(v, size, resultRuns(mb))
				times[v.name] = append(times[v.name], ds...)
				if v.name != "direct" && peak > 0 {
					over[v.name] = append(over[v.name], float64(peak-idleRSS)/float64(size))
				}
			}
		}
		res := map[string]resultSample{}
		for _, v := range vs {
			t := times[v.name]
			slices.Sort(t)
			s := resultSample{perCall: t[len(t)/2]}
			if o := over[v.name]; len(o) > 0 {
				slices.Sort(o)
				s.rssOver = o[len(o)/2]
			}
			res[v.name] = s
		}
		out[mb] = res
	}
	return out
}

// resultCalls starts v with a server whose tools/call results are size bytes of text,
// makes one small call (the idle RSS is taken after it), then runs calls of the tool
// "big"; it returns each call's time, the idle RSS and the peak RSS (VmHWM).
func resultCalls(v variant, size, runs int) ([]time.Duration, int64, int64) {
	rv := v
	rv.argv = append(slices.Clone(v.argv), "--reply-size", strconv.Itoa(size))
	p, idleRSS := startIdle(rv)
	defer p.stop()
	return bigCalls(p, v.name, size, runs), idleRSS, procStatus(p.cmd.Process.Pid, "VmHWM")
}

// startIdle starts v, initializes it and makes one ordinary call, so that the
// proxy's buffers for a small message are in place, and returns it with its RSS then.
func startIdle(v variant) (*proc, int64) {
	p := start(v)
	initialize(p)
	p.roundTrip([]byte(`{"jsonrpc":"2.0","id":"warm","method":"tools/list"}`))
	return p, procStatus(p.cmd.Process.Pid, "VmRSS")
}

// bigCalls makes runs calls of the server's --reply-size tool, checking each answer
// holds at least size bytes, and returns the time of each.
func bigCalls(p *proc, name string, size, runs int) []time.Duration {
	var ds []time.Duration
	for i := range runs {
		t0 := time.Now()
		resp := p.roundTrip([]byte(`{"jsonrpc":"2.0","id":"big-` + strconv.Itoa(i) + `","method":"tools/call","params":{"name":"big","arguments":{}}}`))
		ds = append(ds, time.Since(t0))
		if len(resp) < size {
			log.Fatalf("%s: the large answer came back with %d bytes, want more than %d", name, len(resp), size)
		}
	}
	return ds
}

// argsCalls starts v in front of the server, makes one small call (the idle RSS is
// taken after it), then runs calls whose arguments hold a string of size bytes (a
// file's contents, an image) of a tool that answers small ("fail": its answer is a
// line of text), the host direction of resultCalls.
func argsCalls(v variant, size, runs int) ([]time.Duration, int64, int64) {
	p, idleRSS := startIdle(v)
	defer p.stop()
	head := `","method":"tools/call","params":{"name":"fail","arguments":{"path":"/tmp/x","_bir_call_id":"c-big","content":"`
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	var ds []time.Duration
	for i := range runs {
		msg := append(append(append([]byte(`{"jsonrpc":"2.0","id":"big-`+strconv.Itoa(i)), head...), body...), `"}}}`...)
		t0 := time.Now()
		resp := p.roundTrip(msg)
		ds = append(ds, time.Since(t0))
		if !bytes.Contains(resp, []byte(`"id":"big-`+strconv.Itoa(i)+`"`)) {
			log.Fatalf("%s: the call with large arguments was answered %.200q", v.name, resp)
		}
	}
	return ds, idleRSS, procStatus(p.cmd.Process.Pid, "VmHWM")
}

// parseSizes reads a comma-separated list of sizes in MiB.
func parseSizes(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			log.Fatalf("-result-mb: %q is not a size in MiB", f)
		}
		out = append(out, n)
	}
	return out
}

func printResults(vs []variant, res map[int]map[string]resultSample, sizesMB []int) {
	printSized(vs, res, sizesMB, "result")
}

// printSized prints a sized workload's figures; what names what is sized.
func printSized(vs []variant, res map[int]map[string]resultSample, sizesMB []int, what string) {
	for _, mb := range sizesMB {
		fmt.Printf("  %d MiB %s:\n", mb, what)
		r := res[mb]
		for _, v := range vs {
			extra := ""
			if o := r[v.name].rssOver; o != 0 {
				extra = fmt.Sprintf("  peak RSS over idle %.2fx the %s", o, what)
			}
			ratioS := ""
			if v.name != "direct" && v.name != "copy-relay" {
				ratioS = fmt.Sprintf("  %.2fx the copy relay", ratio(r[v.name].perCall, r["copy-relay"].perCall))
			}
			fmt.Printf("    %-24s %9s/call%s%s\n", v.name, r[v.name].perCall.Round(10*time.Microsecond), ratioS, extra)
		}
		for _, v := range vs {
			if b, ok := alsoBase(v.name); ok {
				fmt.Printf("    %-24s %.2fx time  %s\n", v.name, ratio(r[v.name].perCall, r[b].perCall), b)
			}
		}
	}
}

// issueTable collects the rows of issue 26's table as the workloads run; print shows
// each proxy variant's row as a ratio to the copy relay measured in the same run.
type issueTable struct {
	seq     map[string][3]time.Duration
	pipe    map[string]float64
	result  map[int]map[string]resultSample
	sizesMB []int
	args    map[int]map[string]resultSample // the host direction (-only args)
	argsMB  []int
	start   map[string]time.Duration
}

// tableVariants are the columns: the copy relay and every proxy variant that neither
// records nor replays (BIR_OFF=1 and its also: twin, -blocking, -variant-env).
func tableVariants(vs []variant) []variant {
	var out []variant
	for _, v := range vs {
		if v.name == "direct" || v.stateRoot != "" || v.recorder != nil || v.feed != nil {
			continue
		}
		out = append(out, v)
	}
	return out
}

func (t *issueTable) print(vs []variant) {
	if t.seq == nil && t.pipe == nil && t.result == nil && t.args == nil && t.start == nil {
		return
	}
	cols := tableVariants(vs)
	fmt.Println("Issue 26's table (ratios to the copy relay in this run):")
	fmt.Print("  | |")
	for _, v := range cols[1:] {
		fmt.Printf(" %s ÷ copy relay |", v.name)
	}
	fmt.Println(" goal |")
	fmt.Print("  |---|")
	for range cols[1:] {
		fmt.Print("---|")
	}
	fmt.Println("---|")
	row := func(label, goal string, cell func(name string) string) {
		fmt.Printf("  | %s |", label)
		for _, v := range cols[1:] {
			fmt.Printf(" %s |", cell(v.name))
		}
		fmt.Printf(" %s |\n", goal)
	}
	if t.seq != nil {
		b := t.seq["copy-relay"]
		row("sequential p50 / p99", "keep", func(n string) string {
			return fmt.Sprintf("%.2f× / %.2f×", ratio(t.seq[n][0], b[0]), ratio(t.seq[n][1], b[1]))
		})
	}
	if t.pipe != nil {
		row("32 calls in flight, throughput", "≥ 0.9×", func(n string) string {
			return fmt.Sprintf("%.2f×", t.pipe[n]/t.pipe["copy-relay"])
		})
	}
	// The sized rows: the time, then the peak RSS, of each size, for results (server
	// → host) and for arguments (host → server).
	sized := func(what, rssWhat string, sizes []int, res map[int]map[string]resultSample) {
		for _, mb := range sizes {
			r := res[mb]
			row(fmt.Sprintf("%d MB %s, time", mb, what), "≤ 1.2×", func(n string) string {
				return fmt.Sprintf("%.2f×", ratio(r[n].perCall, r["copy-relay"].perCall))
			})
		}
		for _, mb := range sizes {
			r := res[mb]
			row(fmt.Sprintf("peak RSS over idle ÷ %s, %d MB (copy relay %.2f×)", rssWhat, mb, r["copy-relay"].rssOver), "≤ 1.25×", func(n string) string {
				return fmt.Sprintf("%.2f×", r[n].rssOver)
			})
		}
	}
	sized("result", "message", t.sizesMB, t.result)
	sized("arguments", "arguments", t.argsMB, t.args)
	if t.start != nil {
		b := t.start["copy-relay"]
		row("spawn → initialize answered", "≤ +3 ms", func(n string) string {
			return fmt.Sprintf("%+.1f ms (%.1f vs %.1f ms)", ms(t.start[n]-b), ms(t.start[n]), ms(b))
		})
	}
	fmt.Println()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
