package upstream

import (
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// BenchmarkStreamableCalls is the client's cost per small tools/call with 32 in flight
// against the rawhttp fixture (a process of its own, so -benchmem and -cpuprofile count
// the client only): what bir-bench's http workload measures, without the relay.
func BenchmarkStreamableCalls(b *testing.B) {
	url := testutil.HTTPFixture(b, testutil.Build(b, "./testdata/rawhttp"))
	sh, err := newRemoteShared(Remote{URL: url, Name: "bench", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	c := newRemote(sh)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Write([]byte(initReq)); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Read(); err != nil {
		b.Fatal(err)
	}
	if err := c.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		b.Fatal(err)
	}
	const window = 32
	msgs := make([][]byte, b.N)
	for i := range msgs {
		msgs[i] = []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}`)
	}
	sem := make(chan struct{}, window)
	done := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for range b.N {
			if _, err := c.Read(); err != nil {
				done <- err
				return
			}
			<-sem
		}
		done <- nil
	}()
	for _, m := range msgs {
		sem <- struct{}{}
		if err := c.Write(m); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// The requests awaiting their bytes on the wire do not pile up when nothing ever waits
// for them (a host that sends only requests): those on the wire are forgotten.
func TestUnsentListStaysSmall(t *testing.T) {
	var list []<-chan struct{}
	open := make(chan struct{})
	for i := range 10000 {
		ch := make(chan struct{})
		if i%1000 != 0 {
			close(ch)
		} else {
			ch = open
		}
		list = appendUnsent(list, ch)
	}
	if len(list) > 80 {
		t.Errorf("%d requests remembered, want at most 80", len(list))
	}
	if n := len(slices.DeleteFunc(slices.Clone(list), func(ch <-chan struct{}) bool { return ch != open })); n != 10 {
		t.Errorf("%d of the 10 requests not on the wire are remembered", n)
	}
}
