#!/usr/bin/env node
"use strict";
// Lays out the npm packages, ready for `npm pack` or `npm publish`, with the version stamped in:
//
//   node npm/stage.js launcher VERSION OUT
//       OUT/idem-check: the launcher package, its optionalDependencies on every platform
//       package of npm/idem-check/lib/platforms.js at exactly VERSION
//   node npm/stage.js platform VERSION TARGET BIN_DIR OUT
//       OUT/<os>-<cpu>[-musl]: the package of Rust target TARGET with BIN_DIR's idem-check and
//       idem-reference-server (.exe on Windows) in bin/
//
//   node npm/stage.js verify VERSION DIR
//       DIR holds the npm package of every platform the launcher depends on, at VERSION: the
//       release workflow's check that its build matrix and lib/platforms.js agree
//
// VERSION is Cargo.toml's workspace version (scripts/package and the release workflow read it),
// so the crates, the wheels and the npm packages always carry the same one. Prints the folder.

const fs = require("fs");
const path = require("path");
const { PLATFORMS } = require("./idem-check/lib/platforms");

const BINARIES = ["idem-check", "idem-reference-server"];
const SEMVER = /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/;
const USAGE =
  "usage: node npm/stage.js launcher VERSION OUT | platform VERSION TARGET BIN_DIR OUT | verify VERSION DIR";

function die(message) {
  process.stderr.write(`npm/stage.js: ${message}\n`);
  process.exit(2);
}

function writeJson(file, value) {
  fs.writeFileSync(file, JSON.stringify(value, null, 2) + "\n");
}

function stageLauncher(version, out) {
  const source = path.join(__dirname, "idem-check");
  const dest = path.join(out, "idem-check");
  fs.rmSync(dest, { recursive: true, force: true });
  fs.cpSync(source, dest, { recursive: true });
  const manifest = JSON.parse(fs.readFileSync(path.join(source, "package.json"), "utf8"));
  manifest.version = version;
  manifest.optionalDependencies = Object.fromEntries(PLATFORMS.map((p) => [p.pkg, version]));
  writeJson(path.join(dest, "package.json"), manifest);
  return dest;
}

function stagePlatform(version, target, binDir, out) {
  const platform = PLATFORMS.find((p) => p.target === target);
  if (!platform) {
    die(`no npm package for target ${target} (npm/idem-check/lib/platforms.js lists ${PLATFORMS.map((p) => p.target).join(", ")})`);
  }
  const dir = platform.pkg.split("/")[1];
  const dest = path.join(out, dir);
  fs.rmSync(dest, { recursive: true, force: true });
  fs.mkdirSync(path.join(dest, "bin"), { recursive: true });
  const ext = platform.os === "win32" ? ".exe" : "";
  for (const name of BINARIES) {
    const from = path.join(binDir, name + ext);
    try {
      fs.accessSync(from, fs.constants.X_OK);
    } catch {
      die(`${from} is missing or not executable`);
    }
    fs.copyFileSync(from, path.join(dest, "bin", name + ext));
    fs.chmodSync(path.join(dest, "bin", name + ext), 0o755);
  }
  const readme = fs.readFileSync(path.join(__dirname, "platform", "README.md"), "utf8");
  fs.writeFileSync(path.join(dest, "README.md"), readme.replaceAll("PLATFORM", dir).replaceAll("TARGET", target));
  const launcher = JSON.parse(fs.readFileSync(path.join(__dirname, "idem-check", "package.json"), "utf8"));
  writeJson(path.join(dest, "package.json"), {
    name: platform.pkg,
    version,
    description: `The ${dir} binaries of idem-check (install idem-check, not this)`,
    license: launcher.license,
    os: [platform.os],
    cpu: [platform.cpu],
    ...(platform.libc ? { libc: [platform.libc] } : {}),
    files: ["bin/"],
    preferUnplugged: true,
    publishConfig: { access: "public" },
  });
  return dest;
}

function verify(version, dir) {
  const missing = PLATFORMS.map((p) => `idem-check-${p.pkg.split("/")[1]}-${version}.tgz`).filter(
    (file) => !fs.existsSync(path.join(dir, file)),
  );
  if (missing.length > 0) {
    die(`the launcher depends on packages that were not built: ${missing.join(", ")}`);
  }
  return `${PLATFORMS.length} platform packages in ${dir}`;
}

const [command, version, ...rest] = process.argv.slice(2);
if (!version || !SEMVER.test(version)) {
  die(`${USAGE} (VERSION like 1.2.3)`);
}
if (command === "launcher" && rest.length === 1) {
  console.log(stageLauncher(version, rest[0]));
} else if (command === "platform" && rest.length === 3) {
  console.log(stagePlatform(version, ...rest));
} else if (command === "verify" && rest.length === 1) {
  console.log(verify(version, rest[0]));
} else {
  die(USAGE);
}
