import { chmodSync, chownSync, cpSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { repoRoot, requires, runProgram, tempDir } from "../helpers/jobrt.js";

// A site install as npm lays it out: <root>/node_modules/@jobrt/cli (a copy: jobrt finds its install
// root from where its own files are), its dependencies beside it. jobrt.confdir goes in <root>.
requires({ root: process.getuid?.() === 0 });

let root: string;
let confDir: string;
beforeAll(() => {
  root = tempDir("jobrt-install-");
  chmodSync(root, 0o755);
  const scope = join(root, "node_modules/@jobrt");
  mkdirSync(join(scope, "cli"), { recursive: true });
  cpSync(join(repoRoot, "packages/cli/package.json"), join(scope, "cli/package.json"));
  cpSync(join(repoRoot, "packages/cli/dist"), join(scope, "cli/dist"), { recursive: true });
  for (const name of ["core", "launcher", "runtime-none", "runtime-oci", "runtime-shifter"])
    symlinkSync(join(repoRoot, "packages", name), join(scope, name));
  confDir = tempDir("jobrt-siteconf-");
  // A key jobrt.conf does not know: the error names the file, which says which conf dir was read.
  writeFileSync(join(confDir, "jobrt.conf"), "NoSuchKey=1\n");
});

/** `jobrt runtimes` from the copy, with no JOBRT_CONF_DIR (as slurmd runs the Epilog). */
function installedJobrt(env: NodeJS.ProcessEnv = {}) {
  const { JOBRT_CONF_DIR: _, ...rest } = process.env;
  return runProgram([process.execPath, "--", join(root, "node_modules/@jobrt/cli/dist/bin.js"), "runtimes"], {
    env: { ...rest, ...env },
  });
}

function writeConfDirFile(text: string, mode = 0o644, uid = 0): string {
  const file = join(root, "jobrt.confdir");
  writeFileSync(file, text);
  chownSync(file, uid, 0);
  chmodSync(file, mode);
  return file;
}

describe("<install root>/jobrt.confdir names the conf dir", () => {
  it("root's own file is used: the Epilog needs no wrapper", async () => {
    writeConfDirFile(`${confDir}\n`);
    const result = await installedJobrt();
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${confDir}/jobrt.conf:1`);
  });

  it("$JOBRT_CONF_DIR (as --conf-dir) still wins over it", async () => {
    writeConfDirFile(`${confDir}\n`);
    const empty = tempDir("jobrt-noconf-");
    expect((await installedJobrt({ JOBRT_CONF_DIR: empty })).code).toBe(0);
  });

  it.each([
    ["writable by others", 0o666, 0, "writable by group or others (mode 666)"],
    ["writable by its group", 0o664, 0, "writable by group or others (mode 664)"],
    ["owned by another user", 0o644, 65534, "owned by uid 65534, not root"],
  ])("a file %s is ignored with one warning, and /etc/jobrt is used", async (_, mode, uid, why) => {
    const file = writeConfDirFile(`${confDir}\n`, mode, uid);
    const result = await installedJobrt();
    expect(result.stderr).toBe(`jobrt: ${file}: ignored: ${why}; using /etc/jobrt\n`);
    expect(result.code).toBe(0);
  });

  it("a directory others may write makes the file count for nothing", async () => {
    const file = writeConfDirFile(`${confDir}\n`);
    chmodSync(root, 0o777);
    try {
      const result = await installedJobrt();
      expect(result.stderr).toBe(
        `jobrt: ${file}: ignored: its directory is writable by group or others (mode 777); using /etc/jobrt\n`,
      );
    } finally {
      chmodSync(root, 0o755);
    }
  });

  it("a symlink, a FIFO or a relative path is refused the same way", async () => {
    const file = writeConfDirFile("etc/jobrt\n");
    expect((await installedJobrt()).stderr).toBe(`jobrt: ${file}: ignored: not one absolute path; using /etc/jobrt\n`);
    const target = join(tempDir("jobrt-link-"), "confdir");
    writeFileSync(target, `${confDir}\n`);
    await runProgram(["rm", "-f", file]);
    symlinkSync(target, file);
    expect((await installedJobrt()).stderr).toBe(`jobrt: ${file}: ignored (ELOOP); using /etc/jobrt\n`);
    await runProgram(["rm", "-f", file]);
    await runProgram(["mkfifo", "-m", "644", file]);
    const fifo = await installedJobrt();
    expect(fifo.stderr).toBe(`jobrt: ${file}: ignored: not a regular file; using /etc/jobrt\n`);
    await runProgram(["rm", "-f", file]);
  });
});
