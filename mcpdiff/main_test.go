package mcpdiff

import (
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
