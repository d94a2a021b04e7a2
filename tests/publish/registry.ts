import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { repoRoot, runProgram } from "../helpers/jobrt.js";

/**
 * Env for npm/pnpm children that talk ONLY to the test registry: every inherited npm_config_* /
 * pnpm_config_* (pnpm exec sets some, e.g. the machine's registry) is dropped, and a user-level
 * npmrc made in a temp dir carries the registry and token. ~/.npmrc is never read or written.
 */
export function registryEnv(
  userconfig: string,
  registry: string,
  extra: Record<string, string> = {},
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(npm|pnpm)_config_/i.test(k)) env[k] = v;
  return {
    ...env,
    npm_config_userconfig: userconfig,
    npm_config_registry: registry,
    // A cache of this registry's own: the same version number holds other contents in every run
    // (and in other test files), and npx would reuse a package it cached from an earlier one.
    npm_config_cache: join(dirname(userconfig), "npm-cache"),
    npm_config_update_notifier: "false",
    npm_config_fund: "false",
    npm_config_audit: "false",
    TURBO_TELEMETRY_DISABLED: "1",
    ...extra,
  };
}

/** verdaccio, installed once per machine by the script `pnpm release --local` uses (one installer). */
async function installVerdaccio(): Promise<string> {
  const r = await runProgram([process.execPath, join(repoRoot, "scripts/local-registry.mjs"), "install"], {
    cwd: repoRoot,
    timeoutMs: 300_000,
  });
  const bin = r.stdout.trim();
  if (r.code !== 0 || !existsSync(bin))
    throw new Error(`installing verdaccio failed (exit ${r.code}): ${r.stderr.slice(-2000)}`);
  return bin;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

/** Every started registry's stop, so afterAll can stop one whose start timed out half-way. */
const started = new Set<() => Promise<void>>();

/** Stops every registry this process started (by pid); safe to call more than once. */
export async function stopAllRegistries(): Promise<void> {
  for (const stop of [...started]) await stop();
}

export interface LocalRegistry {
  url: string;
  pid: number;
  token: string;
  /** A user-level npmrc (temp dir) with registry= and the token. */
  userconfig: string;
  log: () => string;
  stop: () => Promise<void>;
}

/** Starts verdaccio on 127.0.0.1 (free port), storage in `dir`, no uplinks, and adds a publishing user. */
export async function startRegistry(dir: string): Promise<LocalRegistry> {
  const bin = await installVerdaccio();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/`;
  mkdirSync(dir, { recursive: true });
  const config = join(dir, "config.yaml");
  writeFileSync(
    config,
    [
      `storage: ${join(dir, "storage")}`,
      "auth:",
      "  htpasswd:",
      `    file: ${join(dir, "htpasswd")}`,
      "    max_users: 10",
      "uplinks: {}",
      "packages:",
      "  '@*/*':",
      "    access: $all",
      "    publish: $authenticated",
      "  '**':",
      "    access: $all",
      "    publish: $authenticated",
      "web:",
      "  enable: false",
      "log: { type: stdout, format: pretty, level: warn }",
      "",
    ].join("\n"),
  );
  let output = "";
  const child: ChildProcess = spawn(process.execPath, [bin, "--config", config, "--listen", `127.0.0.1:${port}`], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.setEncoding("utf8").on("data", (d: string) => (output += d));
  child.stderr?.setEncoding("utf8").on("data", (d: string) => (output += d));
  const pid = child.pid as number;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    started.delete(stop);
    if (child.exitCode !== null || child.signalCode !== null) return;
    process.kill(pid, "SIGTERM");
    const timer = setTimeout(() => {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }, 5_000);
    await exited;
    clearTimeout(timer);
  };
  started.add(stop);
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`verdaccio exited with ${child.exitCode}: ${output}`);
      try {
        if ((await fetch(`${url}-/ping`)).ok) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`verdaccio did not answer on ${url} within 60 s: ${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const res = await fetch(`${url}-/user/org.couchdb.user:ci`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "ci", password: "ci-pass-123", email: "ci@example.invalid" }),
    });
    const body = (await res.json()) as { token?: string };
    if (!res.ok || !body.token) throw new Error(`adding a registry user failed: ${res.status} ${JSON.stringify(body)}`);
    const userconfig = join(dir, "user.npmrc");
    writeFileSync(
      userconfig,
      `registry=${url}\n@jobrt:registry=${url}\n//127.0.0.1:${port}/:_authToken=${body.token}\n`,
    );
    return { url, pid, token: body.token, userconfig, log: () => output, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
