//go:build !unix

package verifycmd

// oNonBlock: none here; isCassette looks at the file's type first.
const oNonBlock = 0
