//go:build !unix

package main

// logNoFollow: no O_NOFOLLOW here; logFile.open refuses a link it sees first.
const logNoFollow = 0
