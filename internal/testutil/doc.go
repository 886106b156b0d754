// Package testutil is the one home of what the module's tests share:
//
//   - building the module's programs (the proxy and the fixtures under testdata/) for
//     tests that run them as real processes (Build, BuildRace), and watching processes
//     a test did not start (Alive, WaitExit, ReadPidfile);
//   - running a child process over real pipes with bounded reads and waits (Start, Proc);
//   - the test binary re-run as a helper process (HelperCommand, MainWithHelpers);
//   - a log sink several goroutines write and a test can wait on (SyncBuffer);
//   - bounded waits (Guard, Context, Recv, Eventually);
//   - every package's TestMain (Main), which fails a run that leaves goroutines behind
//     (CheckGoroutines);
//   - the contract's test data, kept in the repository (ContractFile).
package testutil
