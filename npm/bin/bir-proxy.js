#!/usr/bin/env node
// The bir-proxy command of the npm package: it starts the native binary that the
// platform package (@bir-proxy/OS-CPU, an optional dependency npm installs only on its
// own OS and CPU) holds, with this process's arguments, environment and stdio, and ends
// as the binary ends (its exit code, or the signal it died of). Nothing is downloaded,
// at install or here. Plain Node, no dependencies.
//
// The binary does everything: it reads and writes the host's stdio itself (inherited,
// not piped), so the bytes the host and the server exchange never pass through Node.
// The Linux binaries are static (CGO_ENABLED=0), so one package serves glibc and musl.
"use strict";

const path = require("path");
const childProcess = require("child_process");
const os = require("os");

// process.platform and process.arch → the package holding the binary, and its file.
const PLATFORMS = {
  "darwin arm64": "@bir-proxy/darwin-arm64",
  "darwin x64": "@bir-proxy/darwin-x64",
  "linux arm64": "@bir-proxy/linux-arm64",
  "linux x64": "@bir-proxy/linux-x64",
  "win32 arm64": "@bir-proxy/win32-arm64",
  "win32 x64": "@bir-proxy/win32-x64",
};
const supported = Object.keys(PLATFORMS).map((k) => k.replace(" ", "-")).join(", ");
const exe = process.platform === "win32" ? "bir-proxy.exe" : "bir-proxy";

function fail(lines) {
  process.stderr.write("bir-proxy (npm): " + lines.join("\n  ") + "\n");
  process.exit(1);
}

function binaryPath() {
  const here = process.platform + "-" + process.arch;
  const pkg = PLATFORMS[process.platform + " " + process.arch];
  if (!pkg) {
    fail([
      "no binary is published for " + here + " (supported: " + supported + ").",
      "Build one with Go: go install github.com/bir-dev/bir-proxy/cmd/bir-proxy@latest",
    ]);
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(pkg + "/package.json"));
  } catch (err) {
    // npm skips an optional dependency whose os/cpu do not match, and installs without
    // one that failed to download, or when told --no-optional / --omit=optional.
    fail([
      "the package " + pkg + " that holds the binary for " + here + " is not installed.",
      "It is an optional dependency of bir-proxy: reinstall without --no-optional or",
      "--omit=optional (npm i -g bir-proxy), and with the same OS and CPU as this machine",
      "(a node_modules copied from another platform lacks it). Supported: " + supported + ".",
    ]);
  }
  return path.join(dir, "bin", exe);
}

const bin = binaryPath();
const child = childProcess.spawn(bin, process.argv.slice(2), {
  stdio: "inherit",
  windowsHide: false,
});

// A signal sent to this process alone (an MCP host stopping the server it started:
// SIGTERM to the pid it knows) is passed on; without this the binary would outlive it.
// A terminal's Ctrl-C reaches both, and the binary takes a second one as the first.
const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"];
const handlers = {};
for (const sig of forwarded) {
  handlers[sig] = () => {
    try {
      child.kill(sig);
    } catch (_) {
      // Already gone: its exit is handled below.
    }
  };
  process.on(sig, handlers[sig]);
}

child.on("error", (err) => {
  fail([
    "cannot start " + bin + ": " + err.message,
    "Reinstall bir-proxy (npm i -g bir-proxy) so that npm puts the binary back executable.",
  ]);
});

child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so the host sees what it would see without the launcher.
    for (const sig of forwarded) process.removeListener(sig, handlers[sig]);
    try {
      process.kill(process.pid, signal);
    } catch (_) {
      // Not a signal this platform can raise: fall through to the shell's convention.
    }
    const n = os.constants.signals[signal];
    process.exit(n ? 128 + n : 1);
  }
  process.exit(code === null ? 1 : code);
});
