package relay

import (
	"bytes"
	"strconv"
	"sync"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// pending is a set of requests in flight in one direction, keyed the way JSON-RPC
// matches ids (jsonlex.IDKey: by type and exact value), holding each request's raw id
// so that it can be answered byte for byte. It is the one place that knows which host
// requests the upstream still owes an answer — recording or not — so that when the
// server behind the upstream is replaced every one of them gets an error instead of a
// hang.
type pending struct {
	mu sync.Mutex
	// few holds the first fewMax ids in flight whose key is an integer of at most
	// 18 digits (the ids every SDK uses), rawFew their raw ids as ints would:
	// a host keeps a few dozen requests in flight at most, and a look through a
	// short array costs a fraction of a map's insert and delete (a tenth of the
	// relay's own work per call, measured). An id is in few or in ints, never both.
	few    [fewMax]int64
	rawFew [fewMax][]byte
	nFew   int
	// ints holds the integer ids past those: hashed as a number, and added without
	// allocating a key.
	ints map[int64][]byte
	ids  map[string][]byte
}

// fewMax is how many integer ids pending keeps in its array before its map.
const fewMax = 64

// findFew is where n is in few, or -1.
func (p *pending) findFew(n int64) int {
	for i, v := range p.few[:p.nFew] {
		if v == n {
			return i
		}
	}
	return -1
}

// addInt adds the integer id n with its raw id; under mu.
func (p *pending) addInt(n int64, raw []byte) {
	if i := p.findFew(n); i >= 0 {
		p.rawFew[i] = raw
		return
	}
	if len(p.ints) > 0 {
		if _, ok := p.ints[n]; ok {
			p.ints[n] = raw
			return
		}
	}
	if p.nFew < fewMax {
		p.few[p.nFew], p.rawFew[p.nFew] = n, raw
		p.nFew++
		return
	}
	p.ints[n] = raw
}

// takeInt removes the integer id n, reporting whether it was there; under mu.
func (p *pending) takeInt(n int64) bool {
	if i := p.findFew(n); i >= 0 {
		last := p.nFew - 1
		p.few[i], p.rawFew[i] = p.few[last], p.rawFew[last]
		p.rawFew[last] = nil
		p.nFew = last
		return true
	}
	if len(p.ints) == 0 {
		return false
	}
	_, ok := p.ints[n]
	delete(p.ints, n)
	return ok
}

// hasInt reports whether the integer id n is in flight; under mu.
func (p *pending) hasInt(n int64) bool {
	if p.findFew(n) >= 0 {
		return true
	}
	_, ok := p.ints[n]
	return ok
}

func newPending() *pending {
	return &pending{ints: make(map[int64][]byte), ids: make(map[string][]byte)}
}

// maxIntKey is the most digits an integer key has to be held in pending.ints.
const maxIntKey = 18

// intKey reads k, an IDKey, as the integer it is, when it is one of at most 18 digits.
func intKey(k []byte) (int64, bool) {
	d := k
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > maxIntKey {
		return 0, false
	}
	var n int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(d) < len(k) {
		n = -n
	}
	return n, true
}

func (p *pending) add(id []byte) {
	// The id is a slice of its message: kept as it is, it would pin a 64 MB request
	// in memory until its answer. The usual ids are spelled out by their key, so only
	// the rare others are copied.
	kb, plain := jsonlex.IDKeyBytes(id)
	var raw []byte
	if !plain {
		kb, raw = []byte(jsonlex.IDKey(id)), bytes.Clone(id)
	}
	n, isInt := intKey(kb)
	p.mu.Lock()
	if isInt {
		p.addInt(n, raw)
	} else {
		p.ids[string(kb)] = raw
	}
	p.mu.Unlock()
}

// rawOf is the raw id of an entry: kept, or spelled out by its key (IDKeyBytes).
func rawOf(k string, raw []byte) []byte {
	switch {
	case raw != nil:
		return raw
	case k != "" && k[0] == '"':
		return []byte(k + `"`)
	default:
		return []byte(k)
	}
}

func (p *pending) remove(id []byte) { p.take(id) }

// take removes id, reporting whether it was in flight.
func (p *pending) take(id []byte) bool {
	kb, plain := jsonlex.IDKeyBytes(id)
	if !plain {
		kb = []byte(jsonlex.IDKey(id))
	}
	n, isInt := intKey(kb)
	p.mu.Lock()
	defer p.mu.Unlock()
	if isInt {
		return p.takeInt(n)
	}
	_, ok := p.ids[string(kb)]
	delete(p.ids, string(kb))
	return ok
}

// hasKey reports whether an id with IDKey k is in flight.
func (p *pending) hasKey(k string) bool {
	n, isInt := intKey([]byte(k))
	p.mu.Lock()
	var ok bool
	if isInt {
		ok = p.hasInt(n)
	} else {
		_, ok = p.ids[k]
	}
	p.mu.Unlock()
	return ok
}

func (p *pending) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nFew + len(p.ints) + len(p.ids)
}

// drain empties the set and returns the raw ids it held.
func (p *pending) drain() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([][]byte, 0, p.nFew+len(p.ints)+len(p.ids))
	for i, n := range p.few[:p.nFew] {
		raw := p.rawFew[i]
		if raw == nil {
			raw = strconv.AppendInt(nil, n, 10)
		}
		out = append(out, raw)
		p.rawFew[i] = nil
	}
	p.nFew = 0
	for n, raw := range p.ints {
		if raw == nil {
			raw = strconv.AppendInt(nil, n, 10)
		}
		out = append(out, raw)
	}
	clear(p.ints)
	for k, raw := range p.ids {
		out = append(out, rawOf(k, raw))
	}
	clear(p.ids)
	return out
}

// staleMax bounds the ids remembered as belonging to a replaced server. Past it the
// oldest generation is forgotten: a host that answers a request thousands of requests
// later is vanishingly rare, and memory must stay flat through any number of revivals.
const staleMax = 4096

// stale remembers ids that belonged to a server that was replaced: requests of the old
// server the host may still answer, and host requests the relay already answered with
// an error, which the host may still cancel. Such messages are meant for a server that
// is gone, and must not reach the new one (an answer to a request it never sent, a
// cancel for an id it may reuse).
type stale struct {
	mu     sync.Mutex
	server map[string]struct{}
	host   map[string]struct{}
}

func (s *stale) addServer(ids [][]byte) { s.add(&s.server, ids) }
func (s *stale) addHost(ids [][]byte)   { s.add(&s.host, ids) }

func (s *stale) add(set *map[string]struct{}, ids [][]byte) {
	if len(ids) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if *set == nil || len(*set)+len(ids) > staleMax {
		*set = make(map[string]struct{}, len(ids))
	}
	for _, id := range ids {
		(*set)[jsonlex.IDKey(id)] = struct{}{}
	}
}

// take reports whether id is in the set, and forgets it: each stale id is dropped once.
func (s *stale) take(set map[string]struct{}, id []byte) bool {
	k := jsonlex.IDKey(id)
	if _, ok := set[k]; ok {
		delete(set, k)
		return true
	}
	return false
}

// len is how many stale ids are remembered.
func (s *stale) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.server) + len(s.host)
}
