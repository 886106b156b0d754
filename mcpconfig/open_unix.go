//go:build unix

package mcpconfig

import "syscall"

// oNonBlock makes an open of a FIFO return at once rather than wait for a writer;
// it does nothing to a regular file.
const oNonBlock = syscall.O_NONBLOCK
