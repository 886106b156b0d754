package jsonlex

import "testing"

func BenchmarkLexAnswer(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":123,"result":{"content":[{"type":"text","text":"hello, world"}]}}`)
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
	msg := []byte(`{"jsonrpc":"2.0","id":123,"result":{"content":[{"type":"text","text":"hello, world"}]}}`)
	for b.Loop() {
		EachRPC(msg, func([]byte, Fields) {})
	}
}
