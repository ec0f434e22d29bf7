"use strict";
// The platforms that have a prebuilt binary, one npm package each (`optionalDependencies` of
// idem-check; npm installs the one whose os, cpu and libc match). `target` is the Rust target
// the release workflow builds it for; npm/stage.js makes each package from this table, so the
// launcher and the packages cannot disagree.

const PLATFORMS = [
  { pkg: "@idem-check/linux-x64", os: "linux", cpu: "x64", libc: "glibc", target: "x86_64-unknown-linux-gnu" },
  { pkg: "@idem-check/linux-arm64", os: "linux", cpu: "arm64", libc: "glibc", target: "aarch64-unknown-linux-gnu" },
  { pkg: "@idem-check/linux-x64-musl", os: "linux", cpu: "x64", libc: "musl", target: "x86_64-unknown-linux-musl" },
  { pkg: "@idem-check/linux-arm64-musl", os: "linux", cpu: "arm64", libc: "musl", target: "aarch64-unknown-linux-musl" },
  { pkg: "@idem-check/darwin-x64", os: "darwin", cpu: "x64", target: "x86_64-apple-darwin" },
  { pkg: "@idem-check/darwin-arm64", os: "darwin", cpu: "arm64", target: "aarch64-apple-darwin" },
  { pkg: "@idem-check/win32-x64", os: "win32", cpu: "x64", target: "x86_64-pc-windows-msvc" },
];

/** The C library of this Linux machine: glibc when Node's report names its version, else musl. */
function linuxLibc() {
  // Without network details the report does no DNS lookups, so it stays a few milliseconds.
  process.report.excludeNetwork = true;
  const header = process.report.getReport().header;
  return header.glibcVersionRuntime ? "glibc" : "musl";
}

/** This machine as npm names it: { os, cpu, libc } (libc only on Linux). */
function currentPlatform() {
  const os = process.platform;
  return { os, cpu: process.arch, libc: os === "linux" ? linuxLibc() : undefined };
}

/** The entry of PLATFORMS for `here`, or undefined when there is no prebuilt binary for it. */
function platformFor(here) {
  return PLATFORMS.find((p) => p.os === here.os && p.cpu === here.cpu && p.libc === here.libc);
}

/** `here` as one word for messages: linux-x64 (glibc), darwin-arm64, … */
function describe(here) {
  return `${here.os}-${here.cpu}${here.libc ? ` (${here.libc})` : ""}`;
}

module.exports = { PLATFORMS, currentPlatform, platformFor, describe };
