package redact

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"testing"
)

// Inputs for the benchmarks and the big-value tests, built once per use.

// bigText is one JSON string of about n bytes of prose (a tool returning a huge file).
func bigText(n int) []byte {
	line := []byte("The quick brown fox jumps over the lazy dog; see https://example.com/a?b=c for more. \n")
	var b bytes.Buffer
	b.Grow(n + 64)
	b.WriteString(`{"content":[{"type":"text","text":"`)
	for b.Len() < n {
		b.Write(bytes.ReplaceAll(line, []byte("\n"), []byte(`\n`)))
	}
	b.WriteString(`"}],"isError":false}`)
	return b.Bytes()
}

// bigArray is an array of n small objects.
func bigArray(n int) []byte {
	var b bytes.Buffer
	b.Grow(n * 100)
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":`)
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`,"name":"item-`)
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`","tags":["alpha","beta"],"score":0.5,"ok":true}`)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// bigImage is an MCP tool result holding one image item of about n bytes of base64.
func bigImage(n int) []byte {
	raw := make([]byte, n*3/4)
	for i := range raw {
		raw[i] = byte(i*7 + i>>8)
	}
	var b bytes.Buffer
	b.Grow(n + 128)
	b.WriteString(`{"content":[{"type":"image","mimeType":"image/png","data":"`)
	b.WriteString(base64.StdEncoding.EncodeToString(raw))
	b.WriteString(`"}]}`)
	return b.Bytes()
}

const smallArgs = `{"owner":"bir-dev","repo":"bir-proxy","title":"Relay drops unknown fields","body":"When the upstream sends a result with extra fields, the host sees them unchanged. Steps: run the proxy against server X with --verbose and check the log at /tmp/x.log.","labels":["bug","relay"],"assignees":["octocat"],"milestone":3,"draft":false}`

func benchReport(b *testing.B, in []byte) {
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		out, _ := Report(in, DefaultBudget)
		if len(out) > DefaultBudget {
			b.Fatalf("%d bytes over the budget", len(out))
		}
	}
}

func BenchmarkReportSmallArgs(b *testing.B)  { benchReport(b, []byte(smallArgs)) }
func BenchmarkReportText100MB(b *testing.B)  { benchReport(b, bigText(100<<20)) }
func BenchmarkReportArray1M(b *testing.B)    { benchReport(b, bigArray(1_000_000)) }
func BenchmarkReportImage100MB(b *testing.B) { benchReport(b, bigImage(100<<20)) }

// BenchmarkRedactorSmallArgs is BenchmarkReportSmallArgs with the buffers kept from one
// value to the next, as the proxy's bookkeeping does.
func BenchmarkRedactorSmallArgs(b *testing.B) { benchRedactor(b, smallArgs) }

// BenchmarkRedactorToolResult is the result most tools give, and the bench server's:
// a text item holding JSON, which redaction reads as the document it is.
func BenchmarkRedactorToolResult(b *testing.B) { benchRedactor(b, toolResult) }

// benchRedactor reports in again and again through one Redactor, whose buffers are
// kept from one value to the next.
func benchRedactor(b *testing.B, in string) {
	raw := []byte(in)
	var z Redactor
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		out, _ := z.Report(raw, DefaultBudget)
		if len(out) > DefaultBudget {
			b.Fatalf("%d bytes over the budget", len(out))
		}
	}
}

// toolResult is the typical tool result: a text item holding JSON.
const toolResult = `{"content":[{"type":"text","text":"{\"text\":\"hello, world\",\"items\":[{\"id\":1,\"name\":\"first\"},{\"id\":2,\"name\":\"second\"}],\"next\":null}"}],"isError":false}`
