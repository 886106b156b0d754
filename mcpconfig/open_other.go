//go:build !unix

package mcpconfig

// oNonBlock: none here.
const oNonBlock = 0
