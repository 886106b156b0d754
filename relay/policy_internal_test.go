package relay

import (
	"strconv"
	"testing"

	"github.com/bir-dev/bir-proxy/toolpolicy"
)

// TestLateOrderBounded: the late calls past lateMax are forgotten oldest first, one
// for one; and their order, in a session where every late call is answered, does not
// grow with the session (100,000 calls).
func TestLateOrderBounded(t *testing.T) {
	pl := newPolicy(&toolpolicy.Policy{CallTimeout: 1})
	for i := range 10000 {
		pl.addLate(strconv.Itoa(i), "t"+strconv.Itoa(i), hostNum{v: float64(i), ok: true}, hostNum{v: float64(i), ok: true})
	}
	if len(pl.late) != lateMax || len(pl.lateTokens) != lateMax || len(pl.lateNums) != lateMax || len(pl.lateTokNums) != lateMax {
		t.Fatalf("%d late, %d tokens, %d numbers, %d token numbers", len(pl.late), len(pl.lateTokens), len(pl.lateNums), len(pl.lateTokNums))
	}
	for i := range 10000 {
		if _, ok := pl.late[strconv.Itoa(i)]; ok != (i >= 10000-lateMax) {
			t.Fatalf("late call %d remembered: %v", i, ok)
		}
	}
	for i := range 100000 {
		k := "x" + strconv.Itoa(i)
		pl.addLate(k, "", hostNum{}, hostNum{})
		pl.forgetLate(k)
		if n := len(pl.lateOrder) - pl.lateHead; n > 2*lateMax+1 {
			t.Fatalf("after %d calls, %d entries in order", i, n)
		}
	}
	if cap(pl.lateOrder) > 8*lateMax {
		t.Fatalf("the order's array has grown to %d", cap(pl.lateOrder))
	}
}
