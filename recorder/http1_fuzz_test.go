package recorder

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"
)

// FuzzQuickAnswer: whenever the quick reading of an answer takes it, net/http reads the
// same answer from the same bytes: the same status, body (as far as the limit), Location
// and Retry-After, and it would not keep a connection the quick reading keeps.
func FuzzQuickAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
		"HTTP/1.1 200\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 503 Busy\r\nRetry-After: 3\r\nretry-after: 9\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://x/\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nabc",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length:  7 \r\n\r\n1234567extra",
	} {
		f.Add([]byte(s), uint16(4096))
		f.Add([]byte(s), uint16(2))
	}
	f.Fuzz(func(t *testing.T, in []byte, lim uint16) {
		limit := int64(lim)
		c := &conn1{br: bufio.NewReaderSize(bytes.NewReader(in), 4<<10)}
		c.br.Peek(1)
		q, ok := c.quick(limit)
		if !ok {
			// Nothing may have been taken: net/http reads it from the first byte.
			if c.br.Buffered() != min(len(in), 4<<10) {
				t.Fatalf("quick refused %q but took %d bytes of it", in, min(len(in), 4<<10)-c.br.Buffered())
			}
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(in)), nil)
		if err != nil {
			t.Fatalf("quick read %q as status %d, net/http refuses it: %v", in, q.status, err)
		}
		body, cut := io.ReadAll(io.LimitReader(resp.Body, limit))
		if resp.StatusCode != q.status || !bytes.Equal(trimSpace(body), q.body) || (cut != nil) != (q.cut != nil) ||
			resp.Header.Get("Location") != q.location {
			t.Fatalf("%q: quick: %d %q cut %v location %q; net/http: %d %q cut %v location %q",
				in, q.status, q.body, q.cut, q.location, resp.StatusCode, trimSpace(body), cut, resp.Header.Get("Location"))
		}
		if d := retryAfter(resp) - q.retryAfter; d > time.Second || d < -time.Second {
			t.Fatalf("%q: Retry-After %v, net/http %v", in, q.retryAfter, retryAfter(resp))
		}
		if q.keep && resp.Close {
			t.Fatalf("%q: quick keeps a connection net/http would close", in)
		}
	})
}
