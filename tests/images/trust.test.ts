/**
 * The site's image trust policy (images.conf TrustPolicy, TrustRegistriesDir; docs/images.md,
 * "Trust") end to end: the built `jobrt`, real runc, a real docker-registry on 127.0.0.1, a GPG
 * key made here, images signed with `skopeo copy --sign-by` into lookaside signature storage.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { jobrt, tempDir } from "../helpers/jobrt.js";
import { type Registry, pushBusybox, startRegistry, expectImagePrerequisites } from "../helpers/registry.js";
import {
  type GpgKey,
  gpgKey,
  lookaside,
  sigstoreAttachments,
  sigstoreKey,
  sigstoreSign,
  signedCopy,
  writePolicy,
} from "../helpers/signing.js";

let nextJob = 790000 + (process.pid % 1000) * 50;
const jobId = () => String(++nextJob);
const NOBODY = ["--uid", "65534", "--gid", "65534"];
/** `jobrt run` of `cat /etc/jobrt-image` (what each pushed image says it is) in `image`, with the conf in `dir`. */
const catImage = (dir: string, image: string, options?: Parameters<typeof jobrt>[1], more: string[] = []) =>
  jobrt(
    ["run", "--conf-dir", dir, "--jobid", jobId(), ...more, "--container-image", image, "cat", "/etc/jobrt-image"],
    options,
  );

/** A node's conf dir naming the site policy and registries.d; with `store`, a SharedStore too. */
function site(reg: Registry, policy: string, registriesDir: string, name: string, store?: string) {
  const dir = tempDir(`jobrt-trust-${name}-`);
  chmodSync(dir, 0o755);
  const cache = join(dir, "cache");
  writeFileSync(join(dir, "jobrt.conf"), `NodeName=${name}\nSpoolDir=${join(dir, "spool")}\nKillWait=2\n`);
  writeFileSync(
    join(dir, "images.conf"),
    `CacheDir=${cache}\nInsecureRegistries=${reg.host}\nTrustPolicy=${policy}\nTrustRegistriesDir=${registriesDir}\n${store ? `SharedStore=${store}\n` : ""}`,
  );
  return { dir, cache };
}

/** A fresh shared store: a root-owned 0755 dir. */
function sharedStore(): string {
  const parent = tempDir("jobrt-trust-store-");
  chmodSync(parent, 0o755);
  const store = join(parent, "store");
  mkdirSync(store, { mode: 0o755 });
  return store;
}

/** The mounts under a dir (a refused image is never mounted). */
function mountsUnder(dir: string): string[] {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[4] ?? "")
    .filter((p) => p.startsWith(`${dir}/`));
}

/** How many blob GETs of `repo` the registry served: a refused image is refused before its pull. */
const blobGets = (reg: Registry, repo: string) =>
  reg
    .log()
    .split("\n")
    .filter((l) => l.includes(`"GET /v2/${repo}/blobs/`)).length;

const signedBy = (key: GpgKey) => [{ type: "signedBy", keyType: "GPGKeys", keyPath: key.publicKey }];
const accept = [{ type: "insecureAcceptAnything" }];

describe("the image trust policy: signatures, allowed repositories, every path", () => {
  let reg: Registry;
  let siteKey: GpgKey;
  let otherKey: GpgKey;
  let registriesDir: string;
  let policy: string;
  const restrictive = () => ({
    default: [{ type: "reject" }],
    transports: { docker: { [`${reg.host}/site`]: signedBy(siteKey), [`${reg.host}/open`]: accept } },
  });
  beforeAll(async () => {
    expectImagePrerequisites(
      ["skopeo", "umoci", "docker-registry", "runc", "gpg", "mksquashfs"],
      "runc, --uid, loop mounts",
    );
    reg = await startRegistry();
    siteKey = gpgKey("site");
    otherKey = gpgKey("other");
    registriesDir = lookaside(reg).registriesDir;
    pushBusybox(reg, "site/base:1", "trusted");
    signedCopy(reg, "site/base:1", "site/app:1", siteKey, registriesDir);
    signedCopy(reg, "site/base:1", "site/other:1", otherKey, registriesDir);
    pushBusybox(reg, "elsewhere/img:1", "elsewhere");
    pushBusybox(reg, "open/img:1", "open");
  }, 120_000);
  afterAll(async () => {
    siteKey?.stop();
    otherKey?.stop();
    await reg?.stop();
  });

  test("signed by the site key runs; unsigned, signed by another key, outside the allowed repositories: refused in one line before any pull; jobrt check says which", async () => {
    policy = writePolicy(restrictive());
    const { dir } = site(reg, policy, registriesDir, "sig");
    const run = (repo: string, ...more: string[]) => catImage(dir, `docker://${reg.host}/${repo}`, {}, more);
    const signed = await run("site/app:1");
    expect(signed.stdout, signed.stderr).toBe("trusted\n");
    // skopeo itself still refuses the unsigned image when the copy drops signatures (what jobrt's pull does).
    const direct = spawnSync(
      "skopeo",
      [
        "--policy",
        policy,
        "--registries.d",
        registriesDir,
        "copy",
        "--remove-signatures",
        "--src-tls-verify=false",
        `docker://${reg.host}/site/base:1`,
        `oci:${join(tempDir("jobrt-trust-direct-"), "l")}:img`,
      ],
      { encoding: "utf8" },
    );
    expect(direct.status).not.toBe(0);
    expect(direct.stderr).toContain("A signature was required, but no signature exists");
    const scope = `transports.docker."${reg.host}/site"`;
    const refused = [
      [
        "site/base:1",
        `is not signed by a key in ${siteKey.publicKey}: it has no signature (looked up as ${registriesDir} says) (policy ${policy}, ${scope}, requirement signedBy)`,
      ],
      [
        "site/other:1",
        `is not signed by a key in ${siteKey.publicKey} (policy ${policy}, ${scope}, requirement signedBy)`,
      ],
      ["elsewhere/img:1", `is refused (policy ${policy}, default, requirement reject)`],
    ] as const;
    for (const [repo, why] of refused) {
      const before = blobGets(reg, repo.split(":")[0] as string);
      const r = await run(repo);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr.trim().split("\n"), r.stderr).toHaveLength(1);
      expect(r.stderr).toContain(`--container-image docker://${reg.host}/${repo} ${why}`);
      expect(blobGets(reg, repo.split(":")[0] as string), "blob fetches of a refused image").toBe(before);
    }
    const open = await run("open/img:1");
    expect(open.stdout, open.stderr).toBe("open\n");
    // jobrt check: accepted and why, refused and why.
    const ok = await jobrt([
      "check",
      "--conf-dir",
      dir,
      "--container-image",
      `docker://${reg.host}/site/app:1`,
      "true",
    ]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain(`trust: accepted by ${policy} (${scope}: signedBy, verified)`);
    const no = await jobrt([
      "check",
      "--conf-dir",
      dir,
      "--container-image",
      `docker://${reg.host}/site/other:1`,
      "true",
    ]);
    expect(no.code).not.toBe(0);
    expect(no.stdout + no.stderr).toContain(`is not signed by a key in ${siteKey.publicKey} (policy ${policy}`);
  }, 180_000);

  test("a job user's own permissive ~/.config/containers/policy.json does not loosen the site's: their unsigned private image is refused, their signed one runs", async () => {
    const own = await startRegistry({ alice: "s3cret" });
    try {
      const creds = "alice:s3cret";
      const own_registriesDir = lookaside(own).registriesDir;
      pushBusybox(own, "mine/base:1", "private-trusted", { creds });
      signedCopy(own, "mine/base:1", "mine/app:1", siteKey, own_registriesDir, creds);
      const sitePolicy = writePolicy({
        default: [{ type: "reject" }],
        transports: { docker: { [own.host]: signedBy(siteKey) } },
      });
      const { dir, cache } = site(own, sitePolicy, own_registriesDir, "user");
      // nobody's home: a policy that accepts anything, an empty registries.d, and their auth file.
      const home = tempDir("jobrt-trust-home-");
      chmodSync(home, 0o755);
      const containers = join(home, ".config", "containers");
      mkdirSync(join(containers, "registries.d"), { recursive: true });
      writeFileSync(join(containers, "policy.json"), JSON.stringify({ default: accept }));
      const auth = join(home, "auth.json");
      writeFileSync(auth, JSON.stringify({ auths: { [own.host]: { auth: Buffer.from(creds).toString("base64") } } }), {
        mode: 0o600,
      });
      spawnSync("chown", ["-R", "65534:65534", home]);
      chownSync(home, 65534, 65534);
      const env = { ...process.env, HOME: home, REGISTRY_AUTH_FILE: auth };
      const run = (repo: string) => catImage(dir, `docker://${own.host}/${repo}`, { env }, NOBODY);
      const unsigned = await run("mine/base:1");
      expect(unsigned.code, unsigned.stderr).toBe(1);
      expect(unsigned.stderr.trim().split("\n")).toHaveLength(1);
      expect(unsigned.stderr).toContain(
        `--container-image docker://${own.host}/mine/base:1 is not signed by a key in ${siteKey.publicKey}: it has no signature`,
      );
      expect(unsigned.stderr).toContain(
        `(policy ${sitePolicy}, transports.docker."${own.host}", requirement signedBy)`,
      );
      const userStore = join(cache, "users", "65534");
      const pulled = existsSync(userStore) ? readdirSync(userStore).filter((n) => /^[0-9a-f]{64}$/.test(n)) : [];
      expect(pulled, "images pulled for the refused step").toEqual([]);
      const signed = await run("mine/app:1");
      expect(signed.stdout, signed.stderr).toBe("private-trusted\n");
    } finally {
      await own.stop();
    }
  }, 180_000);

  test("a rootless jobrt (the job user's own) with a permissive policy in their home: the site's still refuses the unsigned image, the signed one runs", async () => {
    policy = writePolicy(restrictive());
    const { dir, cache } = site(reg, policy, registriesDir, "rootless");
    chmodSync(dir, 0o755);
    mkdirSync(join(dir, "spool"), { mode: 0o1777 });
    chmodSync(join(dir, "spool"), 0o1777);
    mkdirSync(join(cache, "users", "65534"), { recursive: true, mode: 0o755 });
    chmodSync(join(cache, "users", "65534"), 0o700);
    chownSync(join(cache, "users", "65534"), 65534, 65534);
    const home = tempDir("jobrt-trust-rlhome-");
    mkdirSync(join(home, ".config", "containers", "registries.d"), { recursive: true });
    writeFileSync(join(home, ".config", "containers", "policy.json"), JSON.stringify({ default: accept }));
    spawnSync("chown", ["-R", "65534:65534", home]);
    const run = (repo: string) =>
      catImage(dir, `docker://${reg.host}/${repo}`, {
        uid: 65534,
        gid: 65534,
        env: { ...process.env, HOME: home, XDG_RUNTIME_DIR: home },
      });
    const unsigned = await run("site/base:1");
    expect(unsigned.code, unsigned.stderr).toBe(1);
    expect(unsigned.stdout).toBe("");
    expect(unsigned.stderr).toContain(
      `--container-image docker://${reg.host}/site/base:1 is not signed by a key in ${siteKey.publicKey}: it has no signature`,
    );
    const signed = await run("site/app:1");
    expect(signed.stdout, signed.stderr).toBe("trusted\n");
  }, 180_000);

  test("sigstoreSigned with a public key: the signed image runs where skopeo verifies sigstore, else one line says it cannot; the unsigned one is refused", async () => {
    const key = sigstoreKey();
    const regd = sigstoreAttachments(reg);
    const digest = pushBusybox(reg, "sig/app:1", "sigstore-signed");
    await sigstoreSign(reg, "sig/app", digest, key);
    pushBusybox(reg, "sig/unsigned:1", "sigstore-unsigned");
    const file = writePolicy({
      default: [{ type: "reject" }],
      transports: { docker: { [`${reg.host}/sig`]: [{ type: "sigstoreSigned", keyPath: key.publicKey }] } },
    });
    const { dir } = site(reg, file, regd, "sigstore");
    const run = (repo: string) => catImage(dir, `docker://${reg.host}/${repo}`);
    // What this node's skopeo itself makes of the signed image: Debian's 1.9 is built without sigstore.
    const direct = spawnSync(
      "skopeo",
      [
        "--policy",
        file,
        "--registries.d",
        regd,
        "copy",
        "--remove-signatures",
        "--src-tls-verify=false",
        `docker://${reg.host}/sig/app:1`,
        `oci:${join(tempDir("jobrt-trust-sigstore-"), "l")}:img`,
      ],
      { encoding: "utf8" },
    );
    const scope = `(policy ${file}, transports.docker."${reg.host}/sig", requirement sigstoreSigned)`;
    const signed = await run("sig/app:1");
    if (direct.status === 0) {
      expect(signed.stdout, signed.stderr).toBe("sigstore-signed\n");
    } else {
      expect(direct.stderr).toContain("sigstore disabled");
      expect(signed.code).toBe(1);
      expect(signed.stderr.trim().split("\n"), signed.stderr).toHaveLength(1);
      expect(signed.stderr).toContain(
        `--container-image docker://${reg.host}/sig/app:1 cannot be verified: this node's skopeo does not verify sigstore signatures (`,
      );
      expect(signed.stderr).toContain(scope);
    }
    const unsigned = await run("sig/unsigned:1");
    expect(unsigned.code, unsigned.stderr).toBe(1);
    expect(unsigned.stderr).toContain(
      `--container-image docker://${reg.host}/sig/unsigned:1 is not signed by a key in ${key.publicKey}: it has no signature (looked up as ${regd} says) ${scope}`,
    );
  }, 180_000);

  test("the node cache: an image cached under a looser policy is checked again, by tag and by digest, and refused", async () => {
    const file = writePolicy({
      default: [{ type: "reject" }],
      transports: { docker: { [`${reg.host}/site`]: accept } },
    });
    const digest = pushBusybox(reg, "site/later:1", "cached-loosely");
    const { dir } = site(reg, file, registriesDir, "cache");
    const run = (ref: string) => catImage(dir, ref);
    const loose = await run(`docker://${reg.host}/site/later:1`);
    expect(loose.stdout, loose.stderr).toBe("cached-loosely\n");
    writeFileSync(file, JSON.stringify(restrictive()));
    for (const ref of [`docker://${reg.host}/site/later:1`, `docker://${reg.host}/site/later@${digest}`]) {
      const r = await run(ref);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain(
        `--container-image ${ref} is not signed by a key in ${siteKey.publicKey}: it has no signature`,
      );
    }
  }, 180_000);

  test("SharedStore: a job pin and a stored squashfs made under a looser policy are refused and never mounted; a tag moved to an unsigned image after a job pinned the signed one keeps the job on the signed one", async () => {
    const file = writePolicy({
      default: [{ type: "reject" }],
      transports: { docker: { [`${reg.host}/site`]: accept } },
    });
    const store = sharedStore();
    const a = site(reg, file, registriesDir, "tnode-a", store);
    const b = site(reg, file, registriesDir, "tnode-b", store);
    const c = site(reg, file, registriesDir, "tnode-c", store);
    const digest = pushBusybox(reg, "site/stored:1", "stored-loosely");
    const ref = `docker://${reg.host}/site/stored:1`;
    const run = (node: { dir: string }, job: string, r: string) =>
      jobrt(["run", "--conf-dir", node.dir, "--jobid", job, "-v", "--container-image", r, "cat", "/etc/jobrt-image"]);
    const job = jobId();
    const loose = await run(a, job, ref);
    expect(loose.stdout, loose.stderr).toBe("stored-loosely\n");
    expect(loose.stderr).toContain("shared store squashfs");
    writeFileSync(file, JSON.stringify(restrictive()));
    // The job's second node reads the pin; a new node runs the stored digest: both are asked again.
    for (const [node, j, r] of [
      [b, job, ref],
      [c, jobId(), `docker://${reg.host}/site/stored@${digest}`],
    ] as const) {
      const out = await run(node, j, r);
      expect(out.code, out.stderr).toBe(1);
      expect(out.stdout).toBe("");
      expect(out.stderr).toContain(
        `--container-image ${r} is not signed by a key in ${siteKey.publicKey}: it has no signature`,
      );
      expect(mountsUnder(node.cache)).toEqual([]);
    }
    // Signed, pinned by the job; then the tag moves to an unsigned image.
    signedCopy(reg, "site/base:1", "site/moving:1", siteKey, registriesDir);
    const moving = `docker://${reg.host}/site/moving:1`;
    const job2 = jobId();
    const first = await run(a, job2, moving);
    expect(first.stdout, first.stderr).toBe("trusted\n");
    pushBusybox(reg, "site/moving:1", "moved-unsigned");
    const second = await run(b, job2, moving);
    expect(second.stdout, second.stderr).toBe("trusted\n");
    expect(second.stderr).toContain(`pinned for job ${job2} step 0 by another node`);
    const newJob = await run(b, jobId(), moving);
    expect(newJob.code, newJob.stderr).toBe(1);
    expect(newJob.stderr).toContain(
      `--container-image ${moving} is not signed by a key in ${siteKey.publicKey}: it has no signature`,
    );
  }, 240_000);
});
