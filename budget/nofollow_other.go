//go:build !unix

package budget

// oNoFollow: none here; O_EXCL still refuses a name that exists, links included.
const oNoFollow = 0
