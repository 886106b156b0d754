package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// deadConn is a server that answers nothing and goes away when told: Read
// returns io.EOF once die is closed; Write fails after that, as a pipe to a
// dead process does.
type deadConn struct {
	die  chan struct{}
	once sync.Once
}

func (d *deadConn) Read() ([]byte, error) { <-d.die; return nil, io.EOF }
func (d *deadConn) Write([]byte) error {
	select {
	case <-d.die:
		return errors.New("broken pipe")
	default:
		return nil
	}
}
func (d *deadConn) Close() error { d.once.Do(func() { close(d.die) }); return nil }

// TestStartGuardAnswersEachRequestOnce races the host's requests against the
// server's death: every request is answered exactly once, by the guard (an
// error answer Read returns) or by its writer (Write failed), never both and
// never neither.
func TestStartGuardAnswersEachRequestOnce(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for round := range 50 {
		up := &deadConn{die: make(chan struct{})}
		g := guardStarted(up, func() string { return "gone" }, log)
		const n = 20
		var failed sync.Map
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += 2 {
					msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
					if err := g.Write(msg); err != nil {
						failed.Store(i, true)
					}
					if i == round%n {
						up.Close()
					}
				}
			}()
		}
		answered := map[int]int{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				msg, err := g.Read()
				if err != nil {
					return
				}
				answered[int(gjson.GetBytes(msg, "id").Int())]++
			}
		}()
		wg.Wait()
		g.Close()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("Read did not end after Close")
		}
		for i := range n {
			_, f := failed.Load(i)
			if got := answered[i]; (got == 1) == f || got > 1 {
				t.Fatalf("round %d: request %d answered %d times by the guard, Write failed: %v", round, i, got, f)
			}
		}
	}
}

// TestStartGuardPassThrough: once the server has answered, the guard keeps
// nothing and a later loss is the relay's.
func TestStartGuardPassThrough(t *testing.T) {
	up := &scriptConn{reads: [][]byte{[]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)}}
	g := guardStarted(up, func() string { t.Error("cause asked for after an answer"); return "" }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := g.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)); err != nil {
		t.Fatal(err)
	}
	if msg, err := g.Read(); err != nil || !strings.Contains(string(msg), `"result"`) {
		t.Fatalf("%s %v", msg, err)
	}
	g.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	if _, err := g.Read(); err != io.EOF {
		t.Fatalf("after the answer the guard made up %v", err)
	}
}

type scriptConn struct{ reads [][]byte }

func (s *scriptConn) Read() ([]byte, error) {
	if len(s.reads) == 0 {
		return nil, io.EOF
	}
	m := s.reads[0]
	s.reads = s.reads[1:]
	return m, nil
}
func (s *scriptConn) Write([]byte) error { return nil }
func (s *scriptConn) Close() error       { return nil }

func TestCleanLine(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[1;31merror:\x1b[0m two\r": "error: two",
		"\tthree\tfour  ":               "three four",
		"bell\x07 and \xff":             "bell and ?",
	} {
		if got := cleanLine([]byte(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
