#!/usr/bin/env node
// A registry on loopback for trying jobrt before its first npm release (`pnpm release --local`,
// docs/writing-a-runtime.md "Before the first release"). verdaccio, no uplinks: it serves only what
// was published into it; everything else still comes from the machine's usual registry.
//
//   node scripts/local-registry.mjs start    fresh storage, listen, add a publishing user
//   node scripts/local-registry.mjs stop     stop the one this dir started (by its recorded pid)
//   node scripts/local-registry.mjs status   say whether it runs, and where
//   node scripts/local-registry.mjs list     each workspace package and the version it serves
//   node scripts/local-registry.mjs install  install verdaccio (once per machine) and print its bin
//
// State lives in $JOBRT_LOCAL_REGISTRY_DIR (default ~/.cache/jobrt/local-registry): pid, url,
// config, storage and a user npmrc holding the publish token. Port: $JOBRT_LOCAL_REGISTRY_PORT
// (default 4873, verdaccio's usual one).
import { spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";

/** verdaccio 6.9+ needs Node 22; 6.8.0 needs node-fetch pinned because the mirror lacks its `cjs` tag. */
const VERDACCIO_VERSION = "6.8.0";
const stateDir =
  process.env.JOBRT_LOCAL_REGISTRY_DIR ||
  join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "jobrt/local-registry");
const port = Number(process.env.JOBRT_LOCAL_REGISTRY_PORT || 4873);
const files = {
  pid: join(stateDir, "registry.pid"),
  url: join(stateDir, "registry.url"),
  config: join(stateDir, "config.yaml"),
  npmrc: join(stateDir, "user.npmrc"),
  log: join(stateDir, "registry.log"),
};

function fail(message) {
  process.stderr.write(`local-registry: ${message}\n`);
  process.exit(1);
}

/** verdaccio installed once per machine; a half-finished install is never seen (rename into place). */
function verdaccioBin() {
  const dir = join(tmpdir(), `jobrt-verdaccio-${VERDACCIO_VERSION}`);
  const bin = join(dir, "node_modules/verdaccio/bin/verdaccio");
  if (existsSync(bin)) return bin;
  const staging = `${dir}.${process.pid}`;
  mkdirSync(staging, { recursive: true });
  writeFileSync(
    join(staging, "package.json"),
    `${JSON.stringify({ name: "jobrt-local-registry", private: true, overrides: { "node-fetch": "2.7.0" } })}\n`,
  );
  process.stderr.write(`local-registry: installing verdaccio@${VERDACCIO_VERSION} (once)\n`);
  const r = spawnSync("npm", ["install", "--no-audit", "--no-fund", "-E", `verdaccio@${VERDACCIO_VERSION}`], {
    cwd: staging,
    stdio: ["ignore", "ignore", "inherit"],
  });
  if (r.status !== 0) fail(`installing verdaccio@${VERDACCIO_VERSION} failed (npm exit ${r.status})`);
  try {
    renameSync(staging, dir);
  } catch {
    rmSync(staging, { recursive: true, force: true }); // another install won the race
  }
  return bin;
}

/** The recorded pid, only while that pid is still our verdaccio (a recycled pid is not ours). */
function runningPid() {
  if (!existsSync(files.pid)) return undefined;
  const pid = Number(readFileSync(files.pid, "utf8"));
  try {
    // verdaccio renames its process title, so its cmdline no longer names the config: the cwd it
    // was started in (the state dir) is what says it is ours.
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    return cmdline.includes("verdaccio") && readlinkSync(`/proc/${pid}/cwd`) === realpathSync(stateDir)
      ? pid
      : undefined;
  } catch {
    return undefined;
  }
}

function writeConfig() {
  const lines = [
    `storage: ${join(stateDir, "storage")}`,
    "auth:",
    "  htpasswd:",
    `    file: ${join(stateDir, "htpasswd")}`,
    "    max_users: 10",
    "uplinks: {}",
    "packages:",
    "  '@*/*': { access: $all, publish: $authenticated }",
    "  '**': { access: $all, publish: $authenticated }",
    "web:",
    "  enable: false",
    "log: { type: stdout, format: pretty, level: warn }",
  ];
  writeFileSync(files.config, `${lines.join("\n")}\n`);
}

async function waitForPing(url, pid) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      if ((await fetch(`${url}-/ping`)).ok) return;
    } catch {
      // not listening yet
    }
    try {
      process.kill(pid, 0);
    } catch {
      fail(`verdaccio exited before it listened on ${url}; see ${files.log}`);
    }
    if (Date.now() > deadline) fail(`verdaccio did not answer on ${url} within 60 s; see ${files.log}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function addUser(url) {
  const res = await fetch(`${url}-/user/org.couchdb.user:jobrt-local`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "jobrt-local", password: "jobrt-local-pass", email: "local@example.invalid" }),
  });
  const body = await res.json();
  if (!res.ok || !body.token) fail(`adding the publishing user failed: ${res.status} ${JSON.stringify(body)}`);
  const hostPort = new URL(url).host;
  writeFileSync(files.npmrc, `registry=${url}\n//${hostPort}/:_authToken=${body.token}\n`, { mode: 0o600 });
}

function portFree() {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

async function start() {
  if (runningPid() !== undefined) stop();
  if (!(await portFree()))
    fail(`127.0.0.1:${port} is in use by another program; set JOBRT_LOCAL_REGISTRY_PORT to a free port`);
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  // Fresh storage each time: what it serves is exactly the tree published after this start.
  rmSync(join(stateDir, "storage"), { recursive: true, force: true });
  rmSync(join(stateDir, "htpasswd"), { force: true });
  writeConfig();
  const url = `http://127.0.0.1:${port}/`;
  const log = openSync(files.log, "w");
  const child = spawn(process.execPath, [verdaccioBin(), "--config", files.config, "--listen", `127.0.0.1:${port}`], {
    cwd: stateDir,
    stdio: ["ignore", log, log],
    detached: true,
  });
  child.unref();
  writeFileSync(files.pid, `${child.pid}\n`);
  await waitForPing(url, child.pid);
  await addUser(url);
  writeFileSync(files.url, `${url}\n`);
  process.stdout.write(`${url}\n`);
}

function stop() {
  const pid = runningPid();
  rmSync(files.url, { force: true });
  if (pid === undefined) {
    rmSync(files.pid, { force: true });
    return false;
  }
  process.kill(pid, "SIGTERM");
  const deadline = Date.now() + 5_000;
  while (runningPid() !== undefined && Date.now() < deadline) spawnSync("sleep", ["0.1"]);
  if (runningPid() !== undefined) process.kill(pid, "SIGKILL");
  rmSync(files.pid, { force: true });
  return true;
}

/** Each publishable workspace package (packages/*, examples/*) and what the registry serves of it. */
async function list() {
  const pid = runningPid();
  if (pid === undefined) fail("not running: start it with `pnpm release --local`");
  const url = readFileSync(files.url, "utf8").trim();
  let missing = 0;
  for (const group of ["packages", "examples"]) {
    for (const dir of readdirSync(group)) {
      const manifest = join(group, dir, "package.json");
      if (!existsSync(manifest)) continue;
      const { name, version, private: isPrivate } = JSON.parse(readFileSync(manifest, "utf8"));
      if (isPrivate) continue;
      const res = await fetch(`${url}${name.replace("/", "%2f")}`);
      const served = res.ok ? (await res.json())["dist-tags"]?.latest : undefined;
      if (served !== version) missing += 1;
      process.stdout.write(
        `  ${name}@${served ?? "(not published)"}${served === version ? "" : ` (the tree has ${version})`}\n`,
      );
    }
  }
  if (missing > 0) fail(`${missing} package(s) of this tree are not on ${url}`);
}

const command = process.argv[2];
if (command === "start") await start();
else if (command === "stop")
  process.stderr.write(stop() ? "local-registry: stopped\n" : "local-registry: not running\n");
else if (command === "status") {
  const pid = runningPid();
  if (pid === undefined) {
    process.stdout.write("not running\n");
    process.exitCode = 1;
  } else process.stdout.write(`running: pid ${pid}, ${readFileSync(files.url, "utf8").trim()}, npmrc ${files.npmrc}\n`);
} else if (command === "list") await list();
else if (command === "install") process.stdout.write(`${verdaccioBin()}\n`);
else fail(`usage: local-registry.mjs start|stop|status|list|install (got ${JSON.stringify(command ?? "")})`);
