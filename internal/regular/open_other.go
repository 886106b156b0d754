//go:build !unix

package regular

// oNonBlock: none here; a FIFO is refused once open (not a regular file).
const oNonBlock = 0
