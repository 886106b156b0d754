package upstream

import (
	"sync"
	"testing"
)

func TestOwnIDsAreOneNamespace(t *testing.T) {
	ids := NewOwnIDs("bir:p:")
	var wg sync.WaitGroup
	got := make(chan string, 200)
	for range 4 {
		wg.Go(func() {
			for range 50 {
				got <- ids.Next()
			}
		})
	}
	wg.Wait()
	close(got)
	seen := map[string]bool{}
	for id := range got {
		if seen[id] {
			t.Fatalf("%s given out twice", id)
		}
		seen[id] = true
		if !ids.Issued(id) {
			t.Fatalf("%s not known as issued", id)
		}
	}
	if raw := string(ids.NextRaw()); raw != `"bir:p:201"` {
		t.Fatalf("raw id %s", raw)
	}
	for _, s := range []string{"bir:p:202", "bir:p:0", "bir:p:01", "bir:p:", "bir:p:r1", "bir:p:rehandshake:1", "bir:q:1", "bir:p:-1", "bir:p:1 "} {
		if ids.Issued(s) {
			t.Errorf("%q taken for an issued id", s)
		}
	}
	if !ids.Mine("bir:p:x") || ids.Mine("bir:p:") || ids.Mine("other") {
		t.Error("Mine is wrong about the namespace")
	}
	if NewOwnIDs("").Prefix() != DefaultIDPrefix {
		t.Error("no default prefix")
	}
}
