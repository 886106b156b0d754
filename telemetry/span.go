package telemetry

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Span kinds (OTLP's SpanKind).
const (
	KindServer = 2
	KindClient = 3
)

// Status codes (OTLP's Status.StatusCode).
const (
	StatusUnset = 0
	StatusError = 2
)

// Attr is one attribute: a string, or an int when IsInt, or when IntText a string
// that is Int's decimal text.
type Attr struct {
	Key     string
	Str     string
	Int     int64
	IsInt   bool
	IntText bool
}

// String is a string attribute. Its key and value are made valid UTF-8 (a byte that is
// not is U+FFFD): OTLP's strings must be, and a collector refuses a whole request with
// one that is not, so one peer's hostile name would cost a batch of other spans.
func String(k, v string) Attr { return Attr{Key: ValidUTF8(k), Str: ValidUTF8(v)} }

// ValidUTF8 is s with every byte that is not UTF-8 replaced by U+FFFD; s itself when
// it is valid (no allocation).
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Int is an int attribute.
func Int(k string, v int64) Attr { return Attr{Key: k, Int: v, IsInt: true} }

// IntString is a string attribute whose value is v's decimal text, made only as it
// is encoded: a request id's, one per span, allocated no string.
func IntString(k string, v int64) Attr { return Attr{Key: k, Int: v, IntText: true} }

// Span is one finished span.
type Span struct {
	TraceID [16]byte
	SpanID  [8]byte
	Parent  [8]byte // zero: a root span
	// RemoteParent says Parent came from the host's traceparent.
	RemoteParent bool
	Flags        byte // W3C trace flags
	TraceState   string
	Name         string
	Kind         int
	Start, End   time.Time
	// Shared are attributes the span carries with many others (its method's and the
	// session's), encoded once; Attrs are its own.
	Shared    *AttrSet
	Attrs     []Attr
	Status    int
	StatusMsg string
	// Events are what happened during the span (OTLP's Span.events), copied by
	// Submit as Attrs are; DroppedEvents counts those left out past a cap.
	Events        []Event
	DroppedEvents uint32
}

// Event is one event of a span: Name, at Time, with Attrs.
type Event struct {
	Time  time.Time
	Name  string
	Attrs []Attr
}

// AttrSet is a set of attributes many spans carry alike (Span.Shared): encoded for
// OTLP/protobuf once, when made, not once per span. It is not changed once made (a
// batch being encoded may hold it).
type AttrSet struct {
	attrs []Attr
	proto []byte // the attributes as Span.attributes fields (9)
}

// NewAttrSet is the set of as (copied).
func NewAttrSet(as []Attr) *AttrSet {
	s := &AttrSet{attrs: slices.Clone(as)}
	e := pb{}
	for _, a := range s.attrs {
		e.attr(9, a)
	}
	s.proto = e.b
	return s
}

// Attrs are the set's attributes (nil for a nil set); not to be changed.
func (s *AttrSet) Attrs() []Attr {
	if s == nil {
		return nil
	}
	return s.attrs
}

// IDs makes random trace and span ids from a generator of its own (ChaCha8, seeded
// from the system's randomness through math/rand/v2's): cheaper per id than the
// shared one, for one goroutine (bookkeeping's). Not safe for concurrent use.
type IDs struct{ r *rand.ChaCha8 }

// NewIDs is a generator of ids.
func NewIDs() IDs {
	var seed [32]byte
	for i := 0; i < len(seed); i += 8 {
		binary.LittleEndian.PutUint64(seed[i:], rand.Uint64())
	}
	return IDs{r: rand.NewChaCha8(seed)}
}

// TraceID is a random, non-zero trace id.
func (g IDs) TraceID() (id [16]byte) {
	for {
		binary.BigEndian.PutUint64(id[:8], g.r.Uint64())
		binary.BigEndian.PutUint64(id[8:], g.r.Uint64())
		if id != [16]byte{} {
			return id
		}
	}
}

// SpanID is a random, non-zero span id.
func (g IDs) SpanID() (id [8]byte) {
	for {
		binary.BigEndian.PutUint64(id[:], g.r.Uint64())
		if id != [8]byte{} {
			return id
		}
	}
}

// NewTraceID and NewSpanID make random ids (math/rand/v2's generator is seeded from
// the system's randomness and safe for concurrent use).
func NewTraceID() (id [16]byte) {
	for {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
		if id != [16]byte{} {
			return id
		}
	}
}

// NewSpanID is a random, non-zero span id.
func NewSpanID() (id [8]byte) {
	for {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
		if id != [8]byte{} {
			return id
		}
	}
}
