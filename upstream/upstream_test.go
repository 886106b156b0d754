package upstream

import (
	"strings"
	"testing"
)

func TestIsMessage(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("x", 2<<20) + `"}}`
	for _, tc := range []struct {
		line string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, true},
		{`[{"jsonrpc":"2.0","id":1,"result":{}}]`, true},
		{`  {"a":1}  `, true},
		{`Server listening on stdio`, false},
		{`[INFO] ready`, false},
		{`[INFO] ready]`, false},
		{`{not json}`, false},
		{`42`, false},
		{`"a string"`, false},
		{`{}`, true},
		{"\v{}", false},
		{"{}\f", false},
		{"\u00a0{}", false},
		{big, true},
		{"[INFO] " + strings.Repeat("x", 2<<20) + "]", false},
		{"{ INFO " + strings.Repeat("x", 2<<20) + "}", false},
	} {
		if got := IsMessage([]byte(tc.line)); got != tc.want {
			t.Errorf("IsMessage(%.40q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

func BenchmarkIsMessage(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"{\"text\":\"hello, world\"}"}],"isError":false}}`)
	for b.Loop() {
		IsMessage(line)
	}
}
