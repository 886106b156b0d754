package session

import (
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestMain fails the run if a test leaves a goroutine behind: every revival's
// process watchers, stderr copies and timers must end with it.
func TestMain(m *testing.M) { testutil.Main(m) }
