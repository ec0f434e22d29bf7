"use strict";
// Runs the native binary NAME of this platform's package with this process's arguments, and
// exits as it did. Anything that keeps it from running is one line on stderr and exit 1.

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const { currentPlatform, platformFor, describe } = require("./platforms");

const SOURCE_INSTALL = "build it from source instead (Rust: cargo install --locked --path . in a clone of idem-check)";

/** Prints `message` as one line prefixed with NAME and exits 1. */
function fail(name, message) {
  process.stderr.write(`${name}: ${message}\n`);
  process.exit(1);
}

/** The path of binary NAME in this platform's package; exits with a message when it cannot run. */
function locate(name) {
  const here = currentPlatform();
  const platform = platformFor(here);
  if (!platform) {
    fail(name, `no prebuilt binary for ${describe(here)}; ${SOURCE_INSTALL}`);
  }
  let manifest;
  try {
    manifest = require.resolve(`${platform.pkg}/package.json`);
  } catch {
    fail(name, `${platform.pkg}, the binary for ${describe(here)}, is not installed (optional dependencies omitted?); reinstall idem-check without --omit=optional`);
  }
  const binary = path.join(path.dirname(manifest), "bin", name + (here.os === "win32" ? ".exe" : ""));
  try {
    fs.accessSync(binary, fs.constants.X_OK);
  } catch {
    fail(name, `${binary} is missing or not executable; reinstall ${platform.pkg}`);
  }
  return binary;
}

/** Runs binary NAME with this process's arguments and exits with its status (or its signal). */
function launch(name) {
  const binary = locate(name);
  const result = spawnSync(binary, process.argv.slice(2), { stdio: "inherit" });
  if (result.error) {
    fail(name, `could not start ${binary}: ${result.error.message}`);
  }
  if (result.signal) {
    // Die of the same signal, so the caller sees what the binary saw (a CI timeout's SIGTERM).
    process.kill(process.pid, result.signal);
  }
  process.exit(result.status ?? 1);
}

module.exports = { launch, locate };
