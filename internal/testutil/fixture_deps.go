//go:build fixtures

// The fixture programs under testdata/ are outside ./... (the go tool skips directories
// named testdata), so go mod tidy cannot see what they import and would drop it from
// go.mod, breaking their builds. This file, never compiled, shows tidy those imports.
package testutil

import (
	_ "github.com/mark3labs/mcp-go/client"
	_ "github.com/mark3labs/mcp-go/client/transport"
	_ "github.com/mark3labs/mcp-go/mcp"
	_ "github.com/mark3labs/mcp-go/server"
)
