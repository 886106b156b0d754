// Package e2e is the end-to-end suite: the official MCP servers (server-everything,
// server-filesystem, server-memory) and a probe server on the official v2 server SDK,
// driven by scripted hosts on the official TypeScript SDK clients of both protocol
// eras, each scenario run directly and through bir-proxy, and required to produce the
// same transcript. The Node side lives beside this file (host/, servers/,
// package.json); docs/e2e.md says how to run it and what it proves.
//
// The package has no code of its own outside its tests.
package e2e
