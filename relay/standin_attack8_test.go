package relay

import (
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// TestAnswerStandInOfAnErrorIsAnError: interception sheds a long answer's reduction
// when bookkeeping falls behind, and then has only the stand-in: one of an error
// answer must read as an error answer (a result's reported the failed call as ok).
func TestAnswerStandInOfAnErrorIsAnError(t *testing.T) {
	for _, isErr := range []bool{false, true} {
		f, ok := jsonlex.TopFields(answerStandIn([]byte(`"a\"b"`), isErr))
		if !ok || string(f.ID) != `"a\"b"` || (f.Error != nil) != isErr || (f.Result != nil) == isErr || !jsonlex.Valid(answerStandIn([]byte("7"), isErr)) {
			t.Fatalf("isErr %v: %+v", isErr, f)
		}
	}
}
