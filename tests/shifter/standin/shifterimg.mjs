// @ts-check
// The Shifter STAND-IN's `shifterimg` (tests only; not Shifter, not for production).
// Invoked by its wrapper as: node shifterimg.mjs <udiRoot.conf> <argv0> args...
// Reproduces shifterimg's interface (docs/shifter-interface.md 1.9): lookup prints one id line and exits 0, a
// miss is silent with exit 1; pull's status lines and its exit 0 even on FAILURE; images rows.
// The "gateway" is a JSON file named by udiRoot.conf imageGateway=file:///path.

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import {
  Exit,
  aclAllows,
  gatewayName,
  parseImageDescriptor,
  readGateway,
  readUdiRootConf,
  writeGateway,
} from "./common.mjs";
import { getoptLong } from "./getopt.mjs";

const USAGE = [
  "Usage: shifterimg [-v] [-h] [-u|--user=<user list>] [-g|--group=<group list>] <mode> [type:tag | location]",
  "    Modes: images, lookup, pull, login",
];

/** Resolves a --user/--group list (names or numbers) against the host's passwd/group. */
function idList(/** @type {string} */ text, /** @type {string} */ file) {
  const table = readFileSync(file, "utf8")
    .split("\n")
    .map((l) => l.split(":"))
    .filter((f) => f.length > 2);
  return text
    .split(",")
    .filter(Boolean)
    .map((item) => {
      if (/^\d+$/.test(item)) return Number(item);
      const row = table.find((f) => f[0] === item);
      if (!row) throw new Exit(1, [`Failed to lookup ${item}`]);
      return Number(row[2]);
    });
}

const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const [confPath, argv0, ...args] = process.argv.slice(2);
  const parsed = getoptLong(/** @type {string} */ (argv0), args, "hv", [
    { name: "help", hasArg: "no", val: "h" },
    { name: "verbose", hasArg: "no", val: "v" },
    { name: "user", hasArg: "required", val: "u" },
    { name: "group", hasArg: "required", val: "g" },
  ]);
  if (parsed.error) throw new Exit(1, [parsed.error], USAGE);
  let verbose = false;
  /** @type {number[]} */
  let userAcl = [];
  /** @type {number[]} */
  let groupAcl = [];
  for (const o of parsed.options) {
    if (o.opt === "h") {
      process.stdout.write(`${USAGE.join("\n")}\n`);
      return 0;
    }
    if (o.opt === "v") verbose = true;
    if (o.opt === "u") userAcl = idList(/** @type {string} */ (o.arg), "/etc/passwd");
    if (o.opt === "g") groupAcl = idList(/** @type {string} */ (o.arg), "/etc/group");
  }
  const conf = readUdiRootConf(/** @type {string} */ (confPath));
  const [mode, target] = parsed.rest;
  // Test hook: record every call, so tests can prove a request was refused before any tool ran.
  const traceDir = `${conf.values.get("udiRootPath")}/trace`;
  if (existsSync(traceDir)) {
    const record = { tool: "shifterimg", args, uid: process.getuid?.(), gid: process.getgid?.() };
    writeFileSync(`${traceDir}/shifterimg-${Date.now()}-${process.pid}.json`, `${JSON.stringify(record)}\n`);
  }
  if (mode === "images") {
    const db = readGateway(conf);
    if (!db) throw new Exit(1, [], ["ERROR: failed to contact the image gateway."]);
    const rows = Object.entries(db.images)
      .filter(([, img]) => aclAllows(img.userAcl, img.groupAcl))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, img]) => {
        const [type, ...rest] = name.split(":");
        const pulled = img.pulled ?? "1970-01-01T00:00:00";
        return `${db.system.padEnd(10)} ${(type ?? "").padEnd(10)} ${img.status.padEnd(8)} ${img.id.slice(0, 10)}   ${pulled} ${rest.join(":").padEnd(30)}`;
      });
    for (const row of rows) process.stdout.write(`${row}\n`);
    return 0;
  }
  if (mode === "login" || mode === "pullnb" || mode === "expire" || mode === "autoexpire") {
    throw new Exit(1, [`shifterimg stand-in: mode ${mode} is not implemented by the stand-in`]);
  }
  if ((mode !== "lookup" && mode !== "pull") || target === undefined) throw new Exit(1, [], USAGE);
  const image = parseImageDescriptor(target, conf);
  if (!image) throw new Exit(1, [], USAGE);
  const name = gatewayName(image.type, image.tag);
  const db = readGateway(conf);
  if (!db) throw new Exit(1, [], ["ERROR: failed to contact the image gateway."]);
  if (mode === "lookup") {
    const img = db.images[name];
    if (img && img.status === "READY" && aclAllows(img.userAcl, img.groupAcl)) {
      process.stdout.write(`${img.id}\n`);
      return 0;
    }
    if (verbose) process.stdout.write(`Got response: 404\n{"error": "image not found"}\n`);
    return 1;
  }
  // pull: status lines until the status leaves the in-progress set; exit 0 whatever the outcome.
  const print = (/** @type {string} */ status) => {
    const ts = new Date().toISOString().slice(0, 19);
    const line = `${ts} Pulling Image: ${name}, status: ${status}`;
    process.stdout.write(verbose ? `${line}\n` : `\r\x1b[2K${line}`);
  };
  const existing = db.images[name];
  const pending = db.pullable?.[name];
  if (existing && existing.status === "READY" && !pending) {
    print("READY");
  } else {
    const steps = pending?.steps ?? ["PENDING", "PULLING", "EXAMINATION", "CONVERSION", "TRANSFER"];
    for (const s of steps) {
      print(s);
      await sleep(db.pullDelayMs ?? 20);
    }
    const final = pending ? pending.final : "FAILURE";
    print(final);
    if (pending && final === "READY") {
      const fresh = /** @type {import("./common.mjs").GatewayDb} */ (readGateway(conf));
      fresh.images[name] = {
        id: pending.id,
        status: "READY",
        userAcl,
        groupAcl,
        pulled: new Date().toISOString().slice(0, 19),
      };
      if (fresh.pullable) delete fresh.pullable[name];
      writeGateway(conf, fresh);
    }
  }
  if (!verbose) process.stdout.write("\n");
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error) => {
    if (!(error instanceof Exit)) throw error;
    for (const l of error.stderr) process.stderr.write(`${l}\n`);
    for (const l of error.stdout) process.stdout.write(`${l}\n`);
    process.exitCode = error.status;
  },
);
