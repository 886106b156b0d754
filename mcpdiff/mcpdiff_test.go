package mcpdiff

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

func res(s string) Answer { return Answer{Result: []byte(s)} }

func TestCompare(t *testing.T) {
	text := func(s string) string { return `{"content":[{"type":"text","text":` + s + `}]}` }
	cases := []struct {
		name     string
		rec, cur Answer
		o        Options
		want     Status
		diffHas  string
	}{
		{"identical", res(text(`"hi"`)), res(text(`"hi"`)), Options{}, Same, ""},
		{"member order and spacing", res(`{"a":1,"b":[1,2]}`), res(`{ "b" : [1, 2], "a" : 1.0 }`), Options{}, Same, ""},
		{"last duplicate wins", res(`{"a":1,"a":2}`), res(`{"a":2}`), Options{}, Same, ""},
		{"text changed", res(text(`"hi"`)), res(text(`"ho"`)), Options{}, Changed, `+      "text": "ho"`},
		{"text JSON compared as JSON", res(text(`"{\"x\":1,\"y\":2}"`)), res(text(`"{ \"y\": 2, \"x\": 1 }"`)), Options{}, Same, ""},
		{"text JSON diff inside", res(text(`"{\"x\":1,\"y\":2}"`)), res(text(`"{\"x\":1,\"y\":3}"`)), Options{}, Changed, `+        "y": 3`},
		{"timestamp ignored", res(text(`"at 2026-01-02T03:04:05.123Z ok"`)), res(text(`"at 2027-11-12T13:14:15+02:00 ok"`)), Options{}, Same, ""},
		{"timestamp strict", res(text(`"at 2026-01-02T03:04:05Z"`)), res(text(`"at 2027-01-02T03:04:05Z"`)), Options{Strict: true}, Changed, "2027"},
		{"JS date ignored", res(text(`"created: Tue Dec 01 2026 23:54:37 GMT+0000 (Coordinated Universal Time)\nsize: 3"`)), res(text(`"created: Wed Dec 02 2026 00:01:02 GMT+0100 (CET)\nsize: 3"`)), Options{}, Same, ""},
		{"HTTP date ignored", res(text(`"Date: Tue, 01 Dec 2026 23:54:37 GMT"`)), res(text(`"Date: Wed, 02 Dec 2026 00:00:00 GMT"`)), Options{}, Same, ""},
		{"locale time ignored", res(text(`"created at 12:27:06 AM"`)), res(text(`"created at 1:02:03 PM"`)), Options{}, Same, ""},
		{"text blob's time ignored", res(`{"content":[{"type":"resource","resource":{"uri":"x","blob":"YXQgMTI6Mjc6MDYgQU0="}}]}`), res(`{"content":[{"type":"resource","resource":{"uri":"x","blob":"YXQgMTI6Mjc6MTIgQU0="}}]}`), Options{}, Same, ""},
		{"text blob's time strict", res(`{"content":[{"type":"resource","resource":{"uri":"x","blob":"YXQgMTI6Mjc6MDYgQU0="}}]}`), res(`{"content":[{"type":"resource","resource":{"uri":"x","blob":"YXQgMTI6Mjc6MTIgQU0="}}]}`), Options{Strict: true}, Changed, "<14 bytes sha256:"},
		{"uuid ignored", res(`{"structuredContent":{"id":"0f8fad5b-d9cb-469f-a165-70867728950e"}}`), res(`{"structuredContent":{"id":"7c9e6679-7425-40de-944b-e07fc1f90ae7"}}`), Options{}, Same, ""},
		{"duration ignored", res(text(`"took 15ms"`)), res(text(`"took 1.5s"`)), Options{}, Same, ""},
		{"duration number ignored", res(`{"structuredContent":{"durationMs":3}}`), res(`{"structuredContent":{"durationMs":40}}`), Options{}, Same, ""},
		{"a number under items is no duration", res(`{"structuredContent":{"items":3}}`), res(`{"structuredContent":{"items":4}}`), Options{}, Changed, `+    "items": 4`},
		{"a number under lat is no clock reading", res(`{"structuredContent":{"lat":3}}`), res(`{"structuredContent":{"lat":4}}`), Options{}, Changed, `+    "lat": 4`},
		{"a snake_case clock reading ignored", res(`{"structuredContent":{"created_at":3}}`), res(`{"structuredContent":{"created_at":4}}`), Options{}, Same, ""},
		{"ignore path", res(`{"structuredContent":{"n":1,"m":2}}`), res(`{"structuredContent":{"n":9,"m":2}}`), Options{Ignore: []string{"$.structuredContent.n"}}, Same, ""},
		{"ignore path into text JSON", res(text(`"{\"items\":[{\"v\":1}]}"`)), res(text(`"{\"items\":[{\"v\":2}]}"`)), Options{Ignore: []string{"content[*].text.items[*].v"}}, Same, ""},
		{"ignore does not hide others", res(`{"structuredContent":{"n":1,"m":2}}`), res(`{"structuredContent":{"n":9,"m":3}}`), Options{Ignore: []string{"structuredContent.n"}}, Changed, `+    "m": 3`},
		{"meta ignored", res(`{"content":[],"_meta":{"v":1}}`), res(`{"content":[],"_meta":{"v":2}}`), Options{}, Same, ""},
		{"meta strict", res(`{"content":[],"_meta":{"v":1}}`), res(`{"content":[],"_meta":{"v":2}}`), Options{Strict: true}, Changed, ""},
		{"image by hash", res(`{"content":[{"type":"image","data":"aGVsbG8=","mimeType":"image/png"}]}`), res(`{"content":[{"type":"image","data":"aGVsbG8h","mimeType":"image/png"}]}`), Options{}, Changed, "<5 bytes sha256:"},
		{"blob same", res(`{"content":[{"type":"resource","resource":{"uri":"x","blob":"aGVsbG8="}}]}`), res(`{"content":[{"type":"resource","resource":{"blob":"aGVsbG8=","uri":"x"}}]}`), Options{}, Same, ""},
		{"content type changed", res(text(`"x"`)), res(`{"content":[{"type":"image","data":"eA==","mimeType":"image/png"}]}`), Options{}, Changed, `+      "type": "image"`},
		{"isError appeared", res(text(`"ok"`)), res(`{"content":[{"type":"text","text":"boom"}],"isError":true}`), Options{}, ErrorDrift, ""},
		{"isError went away", res(`{"content":[],"isError":true}`), res(`{"content":[]}`), Options{}, ErrorDrift, ""},
		{"rpc error appeared", res(text(`"ok"`)), Answer{Error: []byte(`{"code":-32602,"message":"bad"}`)}, Options{}, ErrorDrift, ""},
		{"rpc error went away", Answer{Error: []byte(`{"code":-32602,"message":"bad"}`)}, res(text(`"ok"`)), Options{}, ErrorDrift, ""},
		{"rpc error same", Answer{Error: []byte(`{"code":-32602,"message":"bad"}`)}, Answer{Error: []byte(`{"message":"bad","code":-32602}`)}, Options{}, Same, ""},
		{"a line of a multi-line text changed", res(text(`"one\ntwo\nthree"`)), res(text(`"one\n2\nthree"`)), Options{}, Changed, "        one\n-        two\n+        2\n         three\n"},
		{"a multi-line text is no quoted one", res(text(`"a\nb"`)), res(text(`"\"\"\"\na\nb"`)), Options{}, Changed, `+        """`},
		{"a line added at the end", res(text(`"a\nb"`)), res(text(`"a\nb\n"`)), Options{}, Changed, "+        \n"},
		{"text lines against members", res(`{"structuredContent":{"s":"x\n  \"y\": 1"}}`), res(`{"structuredContent":{"s":"x","y":1}}`), Options{}, Changed, ""},
		{"rpc error changed", Answer{Error: []byte(`{"code":-32602,"message":"bad"}`)}, Answer{Error: []byte(`{"code":-32603,"message":"bad"}`)}, Options{}, Changed, `+  "code": -32603`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compare(tc.rec, tc.cur, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if c.Status != tc.want {
				t.Fatalf("status %s (%s), want %s\n%s", c.Status, c.Reason, tc.want, c.Diff)
			}
			if (c.Status == Same) != (c.Diff == "") && c.Status != ErrorDrift {
				t.Errorf("status %s with diff %q", c.Status, c.Diff)
			}
			if tc.diffHas != "" && !strings.Contains(c.Diff, tc.diffHas) {
				t.Errorf("diff lacks %q:\n%s", tc.diffHas, c.Diff)
			}
		})
	}
}

func TestUnifiedDiffShape(t *testing.T) {
	var a, b []string
	for i := range 30 {
		a = append(a, "line "+string(rune('a'+i%26)))
	}
	b = append(b, a...)
	b[3] = "changed 3"
	b = append(b[:20], b[21:]...)
	d := unified(a, b, "recorded", "current")
	want := "--- recorded\n+++ current\n@@ -1,7 +1,7 @@\n line a\n line b\n line c\n-line d\n+changed 3\n line e\n line f\n line g\n@@ -18,7 +18,6 @@\n line r\n line s\n line t\n-line u\n line v\n line w\n line x\n"
	if d != want {
		t.Errorf("diff:\n%s\nwant:\n%s", d, want)
	}
}

func TestCompareTool(t *testing.T) {
	rec := `{"name":"a","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}},"annotations":{"readOnlyHint":true}}`
	if d, _, _ := CompareTool([]byte(rec), []byte(`{"annotations":{"readOnlyHint":true},"inputSchema":{"properties":{"x":{"type":"string"}},"type":"object"},"name":"a","description":"new words"}`)); d {
		t.Error("a reordered schema (and a new description) is drift")
	}
	d, reason, diff := CompareTool([]byte(rec), []byte(`{"name":"a","inputSchema":{"type":"object","properties":{"x":{"type":"number"}}}}`))
	if !d || reason != "inputSchema changed" || !strings.Contains(diff, `+      "type": "number"`) {
		t.Errorf("%v %q\n%s", d, reason, diff)
	}
	d, reason, _ = CompareTool([]byte(rec), []byte(`{"name":"a","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}},"outputSchema":{"type":"object"}}`))
	if !d || reason != "outputSchema changed" {
		t.Errorf("%v %q", d, reason)
	}
}

func TestDeepAndHugeInputAreBounded(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000)
	deep2 := strings.Repeat(`{"a":`, 100000) + "2" + strings.Repeat("}", 100000)
	c, err := Compare(res(deep), res(deep2), Options{})
	if err != nil || c.Status != Changed {
		t.Fatalf("%v %v", c.Status, err)
	}
	c, _ = Compare(res(deep), res(deep), Options{})
	if c.Status != Same {
		t.Errorf("deep same: %s", c.Status)
	}
	var b strings.Builder
	b.WriteString(`{"structuredContent":[`)
	for i := range 50000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"i":1}`)
	}
	b.WriteString("]}")
	big := b.String()
	big2 := strings.Replace(big, `{"i":1}]`, `{"i":2}]`, 1)
	c, _ = Compare(res(big), res(big2), Options{})
	if c.Status != Changed || len(c.Diff) > 1<<20 {
		t.Errorf("%s, diff of %d bytes", c.Status, len(c.Diff))
	}
}

func TestParsePath(t *testing.T) {
	for p, want := range map[string]string{
		"$.content[0].text":    "content/#0/text",
		"structuredContent.id": "structuredContent/id",
		`a["b.c"][*].*`:        "a/b.c/#*/*",
	} {
		got, err := parsePath(p)
		if err != nil || strings.Join(got, "/") != want {
			t.Errorf("%s: %v %v, want %s", p, got, err, want)
		}
	}
	for _, bad := range []string{"", "$", "a..b", "a[", "a[x]", `a["b`} {
		if _, err := parsePath(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A changed answer of an array or object of 2^20 members (2-12 MB) took 485 MB-1.6 GB
// to diff: a work item (with its path) was made per member before the 20,000-line
// render cap applied. The walk stops at the budget; a change past the cut is still
// reported, by the hash line.
func TestWideValueRenderIsBounded(t *testing.T) {
	const n = 1 << 20
	wide := func(open, close string, member func(i int) string) string {
		var b strings.Builder
		b.WriteString(`{"structuredContent":` + open)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(member(i))
		}
		b.WriteString(close + "}")
		return b.String()
	}
	cases := map[string][2]string{
		"array":                   {wide("[", "]", func(int) string { return `1` }), ""},
		"array of objects":        {wide("[", "]", func(int) string { return `{"i":1}` }), ""},
		"object":                  {wide("{", "}", func(i int) string { return fmt.Sprintf(`"k%07d":1`, i) }), ""},
		"object, keys descending": {wide("{", "}", func(i int) string { return fmt.Sprintf(`"k%07d":1`, n-i) }), ""},
	}
	for name, c := range cases {
		rec := c[0]
		// The last member changed: past the cut.
		cur := rec[:len(rec)-3] + "2" + rec[len(rec)-2:]
		a, b := res(rec), res(cur)
		var got Comparison
		var err error
		peak := peakHeap(func() { got, err = Compare(a, b, Options{}) })
		if err != nil || got.Status != Changed || !strings.Contains(got.Diff, "too long to show") {
			t.Errorf("%s: %s %v, the change past the cut not reported:\n%.2000s", name, got.Status, err, got.Diff)
		}
		// 20,000 lines of both sides, not a work item per member.
		t.Logf("%s (%d MB): peak heap %d MB over the inputs", name, len(rec)>>20, peak>>20)
		if peak > 64<<20 {
			t.Errorf("%s (%d MB): peak heap %d MB over the inputs to compare", name, len(rec)>>20, peak>>20)
		}
	}
}

// peakHeap is the most heap f had in use over what was in use before it, sampled
// every 100µs (runtime/metrics: no stop of the world), collected often (GOGC 10) so
// that what is in use is near what is live.
func peakHeap(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	if v := read(); v > peak.Load() {
		peak.Store(v)
	}
	return max(peak.Load(), base) - base
}

// The first members of an object too wide to render are its first keys in order, the
// last of a duplicated key winning, whatever order they come in.
func TestFirstMembers(t *testing.T) {
	b := []byte(`{"e":1,"b":1,"type":"image","a":1,"d":1,"b":2,"c":1,"a":3,"f":1}`)
	for n, want := range map[int]string{0: "", 2: "a=3 b=2", 4: "a=3 b=2 c=1 d=1", 20: "a=3 b=2 c=1 d=1 e=1 f=1 type=\"image\""} {
		kvs, typ, more, ok := firstMembers(b, n)
		var got []string
		for _, kv := range kvs {
			got = append(got, kv.k+"="+string(kv.v))
		}
		if !ok || typ != "image" || strings.Join(got, " ") != want || more != (n < 7) {
			t.Errorf("n=%d: %v %q more=%v ok=%v", n, got, typ, more, ok)
		}
	}
	// Many members, settled in rounds: the same first ones.
	var sb strings.Builder
	sb.WriteString("{")
	for i := 999; i >= 0; i-- {
		fmt.Fprintf(&sb, `"k%03d":%d,`, i, i)
	}
	sb.WriteString(`"k001":"last"}`)
	kvs, _, more, ok := firstMembers([]byte(sb.String()), 3)
	if !ok || !more || len(kvs) != 3 || kvs[0].k != "k000" || string(kvs[1].v) != `"last"` || kvs[2].k != "k002" {
		t.Errorf("%v %v %v", kvs, more, ok)
	}
}

// A text of many lines renders a line of it to a line, within the line budget: past
// it the rest is left out and the hash line says so, so a change there still counts.
func TestMultiLineTextIsBounded(t *testing.T) {
	var b strings.Builder
	for i := range 3 * maxLines {
		fmt.Fprintf(&b, "line %d\\n", i)
	}
	rec := `{"content":[{"type":"text","text":"` + b.String() + `end"}]}`
	cur := strings.Replace(rec, `end"`, `END"`, 1)
	c, err := Compare(res(rec), res(cur), Options{})
	if err != nil || c.Status != Changed || !strings.Contains(c.Diff, "too long to show") {
		t.Fatalf("%s %v: the change past the cut not reported:\n%.2000s", c.Status, err, c.Diff)
	}
	r := &renderer{o: &Options{}}
	if n := len(r.render([]byte(rec), nil)); n > maxLines+2 {
		t.Errorf("%d lines rendered, budget %d", n, maxLines)
	}
	two := (&renderer{o: &Options{}}).render([]byte(`{"text":"a\nb","n":1}`), nil)
	if got := strings.Join(two, "|"); got != `{|  "n": 1|  "text": """|    a|    b|  """|}` {
		t.Errorf("rendered %q", got)
	}
}

// Two long one-line values that differ only past the line cap still differ: the cut
// line ends with the whole line's length and hash.
func TestLongLineIsClippedAndStillCompared(t *testing.T) {
	long := strings.Repeat("é", 4*maxLine)
	rec, cur := res(`{"structuredContent":{"s":"`+long+`x"}}`), res(`{"structuredContent":{"s":"`+long+`y"}}`)
	c, err := Compare(rec, cur, Options{})
	if err != nil || c.Status != Changed || !strings.Contains(c.Diff, "bytes sha256:") || len(c.Diff) > 4*maxLine {
		t.Fatalf("%s %v, %d bytes of diff: %.300s", c.Status, err, len(c.Diff), c.Diff)
	}
	if !utf8.ValidString(c.Diff) {
		t.Errorf("a line cut inside a character: %q", c.Diff)
	}
	if c, _ := Compare(rec, res(`{"structuredContent": {"s": "`+long+`x"}}`), Options{}); c.Status != Same {
		t.Errorf("the same long value: %s", c.Status)
	}
}
