package mcpspans

import (
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) { testutil.Main(m) }
