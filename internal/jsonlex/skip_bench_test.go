package jsonlex

import "testing"

// benchAnswer is what the bench's server (testdata/rawserver --reply) answers a call:
// its arguments echoed as a JSON text, escapes and all.
var benchAnswer = []byte(`{"jsonrpc":"2.0","id":123,"result":{"content":[{"type":"text","text":"{\"text\":\"hello, world\"}"}],"isError":false}}`)

func BenchmarkLexAnswer(b *testing.B) {
	msg := benchAnswer
	var lx Line
	for b.Loop() {
		lx.Lex(msg)
	}
}

func BenchmarkLexCall(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":123,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world","_bir_call_id":"c-123"}}}`)
	var lx Line
	for b.Loop() {
		lx.Lex(msg)
	}
}

func BenchmarkEachRPCAnswer(b *testing.B) {
	msg := benchAnswer
	for b.Loop() {
		EachRPC(msg, func([]byte, Fields) {})
	}
}
