//go:build unix

package regular

import "syscall"

// oNonBlock makes an open of a FIFO return at once instead of waiting for a writer
// (it is then refused: not a regular file); it does nothing to a regular file.
const oNonBlock = syscall.O_NONBLOCK
