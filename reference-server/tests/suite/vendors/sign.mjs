// Signs one GitHub delivery with @octokit/webhooks-methods (GitHub's own JavaScript library)
// and prints it as a JSON line like sign.py. Usage: node sign.mjs NODE_MODULES SECRET
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, secret] = process.argv.slice(2);
const dir = join(modules, "@octokit", "webhooks-methods");
const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
const entry = pkg.exports["."].node.import;
const { sign, verify } = await import(pathToFileURL(join(dir, entry)).href);

const body = JSON.stringify({ ref: "refs/heads/main", after: randomUUID() });
const signature = await sign(secret, body);
if (!(await verify(secret, body, signature))) throw new Error("octokit rejects its own signature");
console.log(JSON.stringify({
  scheme: "github",
  library: `@octokit/webhooks-methods ${pkg.version}`,
  headers: { "X-Hub-Signature-256": signature, "X-GitHub-Delivery": randomUUID(), "X-GitHub-Event": "push" },
  body,
}));
