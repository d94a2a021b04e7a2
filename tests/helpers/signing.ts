/**
 * Real image signatures for the trust-policy tests: a GPG key made in the test (its own GNUPGHOME,
 * no passphrase), images signed with `skopeo copy --sign-by` into lookaside signature storage (a
 * plain directory named by a registries.d file), sigstore signatures made with an ECDSA key and
 * pushed as registry attachments, and the site policy.json that wants them.
 */
import { spawnSync } from "node:child_process";
import { type KeyObject, createHash, generateKeyPairSync, sign } from "node:crypto";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Registry } from "./registry.js";
import { tempDir } from "./tmp.js";

export interface GpgKey {
  home: string;
  fingerprint: string;
  /** The exported public key (binary keyring), what a policy's `keyPath` names. */
  publicKey: string;
  /** Stops the key's gpg-agent (started by gpg for this GNUPGHOME only). */
  stop: () => void;
}

function must(argv: string[], what: string, env: NodeJS.ProcessEnv = process.env): string {
  const r = spawnSync(argv[0] as string, argv.slice(1), { encoding: "utf8", env });
  if (r.status !== 0) throw new Error(`${what}: ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** A fresh signing key `name`, in a GNUPGHOME of its own. */
export function gpgKey(name: string): GpgKey {
  const home = join(tempDir("jobrt-gpg-"), "g");
  mkdirSync(home, { mode: 0o700 });
  const env = { ...process.env, GNUPGHOME: home };
  must(
    [
      "gpg",
      "--batch",
      "--passphrase",
      "",
      "--quick-gen-key",
      `${name} <${name}@jobrt.test>`,
      "default",
      "default",
      "never",
    ],
    "gpg key",
    env,
  );
  const colons = must(["gpg", "--batch", "--with-colons", "--list-keys"], "gpg list", env);
  const fingerprint = /^fpr:+([0-9A-F]{40}):/m.exec(colons)?.[1];
  if (!fingerprint) throw new Error(`gpg made no key: ${colons}`);
  // Readable by job users: a private image's signatures are verified as its user (docs/images.md).
  const keyDir = tempDir("jobrt-gpgpub-");
  chmodSync(keyDir, 0o755);
  const publicKey = join(keyDir, `${name}.gpg`);
  const exported = spawnSync("gpg", ["--batch", "--export", fingerprint], { env });
  if (exported.status !== 0 || exported.stdout.length === 0) throw new Error(`gpg --export: ${exported.stderr}`);
  writeFileSync(publicKey, exported.stdout, { mode: 0o644 });
  return { home, fingerprint, publicKey, stop: () => spawnSync("gpgconf", ["--kill", "gpg-agent"], { env }) };
}

/** A registries.d whose lookaside store for `reg` is a plain directory (read and written as `file://`). */
export function lookaside(reg: Registry): { registriesDir: string; signatures: string } {
  const base = tempDir("jobrt-lookaside-");
  chmodSync(base, 0o755);
  const registriesDir = join(base, "registries.d");
  const signatures = join(base, "sigs");
  mkdirSync(registriesDir, { mode: 0o755 });
  mkdirSync(signatures, { mode: 0o755 });
  writeFileSync(
    join(registriesDir, "jobrt-test.yaml"),
    `docker:\n  ${reg.host}:\n    lookaside: file://${signatures}\n    lookaside-staging: file://${signatures}\n`,
    { mode: 0o644 },
  );
  return { registriesDir, signatures };
}

/** Copies `from` to `to` in the registry, signed by `key` (its signature goes to the lookaside store). */
export function signedCopy(
  reg: Registry,
  from: string,
  to: string,
  key: GpgKey,
  registriesDir: string,
  creds?: string,
): void {
  must(
    [
      "skopeo",
      "--insecure-policy",
      "--registries.d",
      registriesDir,
      "copy",
      "--quiet",
      ...(creds ? ["--src-creds", creds, "--dest-creds", creds] : []),
      "--src-tls-verify=false",
      "--dest-tls-verify=false",
      "--sign-by",
      key.fingerprint,
      `docker://${reg.host}/${from}`,
      `docker://${reg.host}/${to}`,
    ],
    "skopeo copy --sign-by",
    { ...process.env, GNUPGHOME: key.home },
  );
}

/** Writes a policy.json (containers-policy.json(5)) readable by everyone; returns its path. */
export function writePolicy(policy: unknown): string {
  const dir = tempDir("jobrt-policy-");
  chmodSync(dir, 0o755);
  const file = join(dir, "policy.json");
  writeFileSync(file, `${JSON.stringify(policy, null, 2)}\n`, { mode: 0o644 });
  return file;
}

export interface SigstoreKey {
  privateKey: KeyObject;
  /** The PEM public key a `sigstoreSigned` requirement's `keyPath` names. */
  publicKey: string;
}

/** A sigstore (cosign-style) ECDSA P-256 key pair; skopeo 1.9 cannot make one, node:crypto can. */
export function sigstoreKey(): SigstoreKey {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const dir = tempDir("jobrt-sigstore-");
  chmodSync(dir, 0o755);
  const file = join(dir, "cosign.pub");
  writeFileSync(file, publicKey.export({ type: "spki", format: "pem" }), { mode: 0o644 });
  return { privateKey, publicKey: file };
}

/** A registries.d that reads sigstore signatures as registry attachments (`use-sigstore-attachments`). */
export function sigstoreAttachments(reg: Registry): string {
  const dir = tempDir("jobrt-sigstore-regd-");
  chmodSync(dir, 0o755);
  writeFileSync(join(dir, "jobrt-test.yaml"), `docker:\n  ${reg.host}:\n    use-sigstore-attachments: true\n`, {
    mode: 0o644,
  });
  return dir;
}

const sha256 = (b: Buffer) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

/**
 * Signs `repo@digest` as cosign does: a simple-signing payload, its ECDSA signature in the layer's
 * `dev.cosignproject.cosign/signature` annotation, pushed (registry API) as the tag `sha256-<hex>.sig`.
 */
export async function sigstoreSign(reg: Registry, repo: string, digest: string, key: SigstoreKey): Promise<void> {
  const payload = Buffer.from(
    JSON.stringify({
      critical: {
        identity: { "docker-reference": `${reg.host}/${repo}` },
        image: { "docker-manifest-digest": digest },
        type: "cosign container image signature",
      },
      optional: null,
    }),
  );
  const config = Buffer.from("{}");
  for (const blob of [config, payload]) {
    const start = await fetch(`http://${reg.host}/v2/${repo}/blobs/uploads/`, { method: "POST" });
    const at = new URL(start.headers.get("location") ?? "", `http://${reg.host}`);
    at.searchParams.set("digest", sha256(blob));
    const put = await fetch(at, { method: "PUT", body: blob, headers: { "content-type": "application/octet-stream" } });
    if (put.status !== 201) throw new Error(`sigstore blob upload: HTTP ${put.status}`);
  }
  const manifest = {
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: "application/vnd.oci.image.config.v1+json", size: config.length, digest: sha256(config) },
    layers: [
      {
        mediaType: "application/vnd.dev.cosign.simplesigning.v1+json",
        size: payload.length,
        digest: sha256(payload),
        annotations: {
          "dev.cosignproject.cosign/signature": sign("sha256", payload, key.privateKey).toString("base64"),
        },
      },
    ],
  };
  const tag = `${digest.replace(":", "-")}.sig`;
  const put = await fetch(`http://${reg.host}/v2/${repo}/manifests/${tag}`, {
    method: "PUT",
    body: JSON.stringify(manifest),
    headers: { "content-type": manifest.mediaType },
  });
  if (put.status !== 201) throw new Error(`sigstore signature manifest: HTTP ${put.status}`);
}
