import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "./lib.mjs";

/** A fresh busybox OCI bundle whose process.args are `args` (`runc spec --rootless`'s with `rootless`). */
export function bundleWithArgs(args, { rootless = false } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "jobrt-bench-bundle-"));
  execFileSync("sh", [join(repoRoot, "scripts/busybox-bundle.sh"), dir, ...(rootless ? ["--rootless"] : [])], {
    stdio: "ignore",
  });
  // A job user's runc must enter it.
  chmodSync(dir, 0o755);
  const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
  config.process.args = args;
  writeFileSync(join(dir, "config.json"), JSON.stringify(config, null, 2));
  return dir;
}

/** A conf dir with jobrt.conf (SpoolDir in a temp dir) and, optionally, an oci.conf. */
export function confDir(ociConf) {
  const dir = mkdtempSync(join(tmpdir(), "jobrt-bench-conf-"));
  // SpoolDir is below it: a job user's runc enters its step dir there.
  chmodSync(dir, 0o755);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${join(dir, "spool")}\n`);
  if (ociConf) writeFileSync(join(dir, "oci.conf"), ociConf);
  return dir;
}

const ID = "jobrt.%n.%u.%j.%s.%t";
export const RUN_MODE_CONF = `RunTimeQuery="runc state ${ID}"
RunTimeRun="runc run ${ID} -b %b"
RunTimeKill="runc kill -a ${ID}"
RunTimeDelete="runc delete --force ${ID}"
`;
export const CREATE_START_CONF = `RunTimeQuery="runc state ${ID}"
RunTimeCreate="runc create ${ID} -b %b"
RunTimeStart="runc start ${ID}"
RunTimeKill="runc kill -a ${ID}"
RunTimeDelete="runc delete --force ${ID}"
`;
