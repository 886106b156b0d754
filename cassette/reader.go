package cassette

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// DefaultMaxLine bounds one line a Reader accepts (a call whose result is as large as
// the proxy's largest message, 256 MiB, and its arguments).
const DefaultMaxLine = 512 << 20

// Reader reads a cassette one line at a time: memory is one line's, whatever the
// cassette's length. It is strict: a line it cannot read is an error naming it, and
// nothing after it is read.
type Reader struct {
	br      *bufio.Reader
	src     io.ReadSeeker // the source when it can seek: a long line is measured before it is held
	name    string
	line    int
	max     int
	header  Header
	ended   bool
	end     End
	lastSeq int64
	skip    Call // Skip's
}

// LineError is a Reader's error: which line, and what is wrong with it.
type LineError struct {
	Name string // the file's name, as given to NewReader
	Line int
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("cassette %s, line %d: %v", e.Name, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// ErrNotCassette says the first line is not a cassette's header; ErrVersion that it is
// one of a version this package does not read; ErrTruncated that the last line ends
// without its newline (the writer was stopped mid-line).
var (
	ErrNotCassette = errors.New("not a bir-proxy cassette (its first line has no \"bir-cassette\" member)")
	ErrVersion     = errors.New("a cassette format version this bir-proxy does not read")
	ErrTruncated   = errors.New("truncated: the line has no newline at its end")
)

// NewReader reads the header of the cassette in r (name is for errors).
func NewReader(r io.Reader, name string) (*Reader, error) {
	return newReader(r, name, DefaultMaxLine)
}

func newReader(r io.Reader, name string, max int) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, 64<<10), name: name, max: max}
	if s, ok := r.(io.ReadSeeker); ok {
		if _, err := s.Seek(0, io.SeekCurrent); err == nil { // not a pipe
			rd.src = s
		}
	}
	b, err := rd.next()
	if err == io.EOF {
		return nil, rd.fail(errors.New("empty: " + ErrNotCassette.Error()))
	}
	if err != nil {
		return nil, err
	}
	v := jsonlex.Get(b, magic)
	if b[0] != '{' || v == nil {
		return nil, rd.fail(ErrNotCassette)
	}
	if string(v) != "1" {
		return nil, rd.fail(fmt.Errorf("%w: version %.40s, this bir-proxy reads %d", ErrVersion, v, Version))
	}
	if err := strict(b, &rd.header); err != nil {
		return nil, rd.fail(fmt.Errorf("the header: %w", err))
	}
	if rd.header.Tools != nil && rd.header.Tools[0] != '[' {
		return nil, rd.fail(errors.New("the header: tools is not an array"))
	}
	return rd, nil
}

// Header is the cassette's header.
func (r *Reader) Header() *Header { return &r.header }

// Line is the number of the line the last Next read.
func (r *Reader) Line() int { return r.line }

// Next reads the next call; io.EOF at the end. The Call's raw values are its own.
func (r *Reader) Next() (*Call, error) {
	c := new(Call)
	if err := r.read(c, true); err != nil {
		return nil, err
	}
	return c, nil
}

// Skip reads the next call as strictly as Next, keeping nothing of it (verify's check
// of the whole file before anything runs); io.EOF at the end.
func (r *Reader) Skip() error {
	r.skip = Call{}
	return r.read(&r.skip, false)
}

func (r *Reader) read(c *Call, keep bool) error {
	for {
		b, err := r.next()
		if err != nil {
			return err
		}
		if r.ended {
			return r.fail(errors.New("a line after the end line"))
		}
		var nc errNotCall
		err = decodeCall(b, c, keep)
		if errors.As(err, &nc) {
			if nc.key == magic && jsonlex.Get(b, "end") == nil {
				return r.fail(errors.New("a second header"))
			}
			if err := strict(b, &r.end); err != nil || !r.end.End {
				return r.fail(fmt.Errorf("an end line that does not read: %v", err))
			}
			r.ended = true
			continue
		}
		if err != nil {
			return r.fail(fmt.Errorf("not a call: %w", err))
		}
		switch {
		case c.Seq <= r.lastSeq:
			return r.fail(fmt.Errorf("seq %d after %d: out of order", c.Seq, r.lastSeq))
		case c.Tool == "":
			return r.fail(errors.New("a call without a tool"))
		case c.Outcome == "":
			return r.fail(errors.New("a call without an outcome"))
		case c.Result != nil && c.Error != nil:
			return r.fail(errors.New("a call with both a result and an error"))
		case c.TooLarge < 0:
			return r.fail(errors.New("a call with a negative tooLarge"))
		case c.TooLarge > 0 && (c.Arguments != nil || c.Result != nil || c.Error != nil):
			// Its values were left out: one that has them is not what a writer wrote.
			return r.fail(errors.New("a call recorded too large that holds arguments, a result or an error"))
		}
		r.lastSeq = c.Seq
		return nil
	}
}

// Dropped is what the end line said was not recorded (0 before it or without one).
func (r *Reader) Dropped() int64 { return r.end.Dropped + r.header.Dropped }

// next returns the next line without its newline, never an empty one.
func (r *Reader) next() ([]byte, error) {
	var line []byte
	var whole bool
	var err error
	if r.src != nil {
		line, whole, err = r.readMeasured()
	} else {
		line, whole, err = ReadLine(r.br, r.max)
	}
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case err != nil:
		r.line++
		return nil, r.fail(err)
	}
	r.line++
	switch {
	case !whole:
		return nil, r.fail(ErrTruncated)
	case len(bytes.TrimSpace(line)) == 0:
		return nil, r.fail(errors.New("an empty line"))
	case !jsonlex.Valid(line):
		return nil, r.fail(errors.New("not JSON"))
	}
	return line, nil
}

// ReadLine reads one line of at most max bytes from br, without its "\n" (or "\r\n");
// whole is false for a last line that ends without one. io.EOF at the end.
//
// The line is gathered in pieces and joined once its length is known: grown by
// append, a line near max held max and a quarter more at once, plus the copy (a
// 600 MB line cost 1.3 GB to refuse); a line past max is refused holding at most max.
func ReadLine(br *bufio.Reader, max int) (line []byte, whole bool, err error) {
	var pieces [][]byte
	n := 0
	for {
		frag, err := br.ReadSlice('\n')
		if n+len(frag) > max {
			return nil, false, fmt.Errorf("longer than %d bytes", max)
		}
		n += len(frag)
		if errors.Is(err, bufio.ErrBufferFull) {
			pieces = append(pieces, bytes.Clone(frag))
			continue
		}
		if err != nil && err != io.EOF {
			return nil, false, fmt.Errorf("reading: %w", err)
		}
		if n == 0 {
			return nil, false, io.EOF
		}
		line = make([]byte, 0, n)
		for i, p := range pieces {
			line = append(line, p...)
			pieces[i] = nil
		}
		line = append(line, frag...)
		if err == io.EOF {
			return line, false, nil
		}
		return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), true, nil
	}
}

// readMeasured is ReadLine for a source that can seek: a line longer than the buffer
// is first measured, holding nothing, then read at its size. A line past max is
// refused without ever being held, and one within it costs its own size only.
func (r *Reader) readMeasured() ([]byte, bool, error) {
	frag, err := r.br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		switch {
		case len(frag) > r.max:
			return nil, false, fmt.Errorf("longer than %d bytes", r.max)
		case err == nil:
			return bytes.TrimSuffix(bytes.Clone(frag[:len(frag)-1]), []byte("\r")), true, nil
		case err != io.EOF:
			return nil, false, fmt.Errorf("reading: %w", err)
		case len(frag) == 0:
			return nil, false, io.EOF
		}
		return bytes.Clone(frag), false, nil
	}
	pos, err := r.src.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, false, fmt.Errorf("reading: %w", err)
	}
	start := pos - int64(r.br.Buffered()) - int64(len(frag))
	n := len(frag)
	for {
		if n > r.max {
			return nil, false, fmt.Errorf("longer than %d bytes", r.max)
		}
		frag, err = r.br.ReadSlice('\n')
		if n += len(frag); n > r.max {
			return nil, false, fmt.Errorf("longer than %d bytes", r.max)
		}
		switch {
		case err == nil:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			return nil, false, nil // the last line, without its newline: truncated
		default:
			return nil, false, fmt.Errorf("reading: %w", err)
		}
		break
	}
	if _, err := r.src.Seek(start, io.SeekStart); err != nil {
		return nil, false, fmt.Errorf("reading: %w", err)
	}
	r.br.Reset(r.src)
	line := make([]byte, n)
	if _, err := io.ReadFull(r.br, line); err != nil || line[n-1] != '\n' {
		return nil, false, fmt.Errorf("reading: the file changed while it was read (%v)", err)
	}
	return bytes.TrimSuffix(line[:n-1], []byte("\r")), true, nil
}

func (r *Reader) fail(err error) error { return &LineError{Name: r.name, Line: r.line, Err: err} }

// strict decodes line into v, refusing members v does not have: a line of another
// format (or a newer version's) is not silently read as this one. Raw members are
// copied verbatim by encoding/json.
func strict(line []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	return nil
}
