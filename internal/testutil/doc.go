// Package testutil is the one home of what the module's tests share: building the
// module's programs (the proxy and the fixtures under testdata/) for tests that run
// them as real processes (Build, BuildRace), and watching processes a test did not
// start (Alive, WaitExit, ReadPidfile).
package testutil
