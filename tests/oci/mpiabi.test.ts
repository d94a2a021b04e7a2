/**
 * The host's MPI brought into an image through a site's CDI spec (docs/mpi.md, "The host's MPI in
 * the container"), with real runc: the spec binds this machine's real Open MPI 4.1 library over
 * the image's. An image whose MPI it can stand in for runs and sees the host's library; one built
 * with MPICH (a file named as MPICH names its library: only the names are read) is refused before
 * any container exists, as root and as a job user with a bundle of their own.
 */
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, join } from "node:path";
import { beforeAll, describe, expect, test } from "vitest";
import { busyboxBundle } from "../helpers/fixtures.js";
import { jobrt, jobrtBin, requires, tempDir } from "../helpers/jobrt.js";

const haveRunc = spawnSync("runc", ["--version"]).status === 0;
const isRoot = process.getuid?.() === 0;
const LIBDIR = "/usr/lib/x86_64-linux-gnu";
const HOST_OMPI = realpathSync(join(LIBDIR, "libmpi.so.40"));
const NOBODY = 65534;

let nextJob = 950000 + (process.pid % 1000) * 20;
const jobId = () => String(++nextJob);

/** A jobrt.conf dir whose one CDI spec binds the host's libmpi.so.40 over the image's. */
function siteConf(): string {
  const specs = tempDir("jobrt-mpiabi-cdi-");
  writeFileSync(
    join(specs, "mpi.json"),
    JSON.stringify({
      cdiVersion: "0.6.0",
      kind: "site.example/mpi",
      devices: [
        {
          name: "host",
          containerEdits: {
            mounts: [{ hostPath: HOST_OMPI, containerPath: `${LIBDIR}/libmpi.so.40`, options: ["ro", "bind"] }],
          },
        },
      ],
    }),
  );
  const dir = tempDir("jobrt-mpiabi-conf-");
  const spool = tempDir("jobrt-mpiabi-spool-");
  chmodSync(spool, 0o755);
  writeFileSync(join(dir, "jobrt.conf"), `SpoolDir=${spool}\nKillWait=2\nCdiSpecDirs=${specs}\n`);
  chmodSync(dir, 0o755);
  return dir;
}

/** A busybox bundle whose rootfs holds empty files of these names in LIBDIR. */
function bundleWith(files: string[], rootless = false): string {
  const parent = tempDir("jobrt-mpiabi-bundle-");
  chmodSync(parent, 0o755);
  const bundle = busyboxBundle(join(parent, "bundle"), rootless);
  const lib = join(bundle, "rootfs", LIBDIR);
  mkdirSync(lib, { recursive: true });
  for (const f of files) writeFileSync(join(lib, f), "");
  return bundle;
}

const run = (conf: string, bundle: string, argv: string[], user: string[] = []) =>
  jobrt([
    "run",
    "--conf-dir",
    conf,
    "--jobid",
    jobId(),
    ...user,
    "--container",
    bundle,
    "--container-device",
    "site.example/mpi=host",
    ...argv,
  ]);

describe("host MPI through CDI into a runc container: the ABI check", () => {
  requires({ runc: haveRunc, root: isRoot, "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });
  let conf: string;
  beforeAll(() => {
    conf = siteConf();
  });

  test("an Open MPI 4.0 image runs with the host's Open MPI 4.1 library in place of its own", async () => {
    const bundle = bundleWith(["libmpi.so.40.20.0"]);
    symlinkSync("libmpi.so.40.20.0", join(bundle, "rootfs", LIBDIR, "libmpi.so.40"));
    const r = await run(conf, bundle, ["sh", "-c", `wc -c < ${LIBDIR}/libmpi.so.40`]);
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe(String(statSync(HOST_OMPI).size));
    expect(r.code).toBe(0);
  });

  test("an MPICH image: refused in one line naming both MPIs, with no container made", async () => {
    const bundle = bundleWith(["libmpich.so.12", "libmpich.so.12.2.2"]);
    const r = await run(conf, bundle, ["touch", "/ran"]);
    expect(r.code).not.toBe(0);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(
      `the host's MPI that --container-device site.example/mpi=host brings, Open MPI 4.x (${LIBDIR}/${basename(HOST_OMPI)}), cannot run the image's MPICH ABI (${LIBDIR}/libmpich.so.12.2.2) in ${bundle}`,
    );
    expect(existsSync(join(bundle, "rootfs", "ran"))).toBe(false);
  });

  test("jobrt check shows (on stderr) the refusal exec would give, and passes the image the host's MPI can stand in for", async () => {
    const args = (bundle: string) => [
      "check",
      "--conf-dir",
      conf,
      "--runtime",
      "oci",
      "--container",
      bundle,
      "--container-device",
      "site.example/mpi=host",
      "true",
    ];
    const mpich = bundleWith(["libmpich.so.12.2.2"]);
    const r = await jobrt(args(mpich));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(
      `component 0: runtime oci: host MPI: failed: jobrt exec refuses: the host's MPI that --container-device site.example/mpi=host brings, Open MPI 4.x (${LIBDIR}/${basename(HOST_OMPI)}), cannot run the image's MPICH ABI (${LIBDIR}/libmpich.so.12.2.2) in ${mpich}`,
    );
    const ompi = await jobrt(args(bundleWith(["libmpi.so.40.30.0"])));
    expect(`${ompi.stdout}${ompi.stderr}`).not.toContain("host MPI");
    expect(ompi.code).toBe(0);
  });

  test("an MPI the bundle itself binds in from the host is the image's: an MPICH dir bound at /usr/local/lib is refused", async () => {
    const bundle = bundleWith([]);
    const mpich = tempDir("jobrt-mpiabi-mpich-");
    chmodSync(mpich, 0o755);
    writeFileSync(join(mpich, "libmpich.so.12.2.2"), "");
    const file = join(bundle, "config.json");
    const config = JSON.parse(readFileSync(file, "utf8"));
    config.mounts.push({ destination: "/usr/local/lib", type: "bind", source: mpich, options: ["rbind", "ro"] });
    writeFileSync(file, JSON.stringify(config));
    // The image's own /usr/local/lib is empty: only the bind has the library.
    mkdirSync(join(bundle, "rootfs", "usr", "local", "lib"), { recursive: true });
    const r = await run(conf, bundle, ["true"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("cannot run the image's MPICH ABI (/usr/local/lib/libmpich.so.12.2.2)");
  });

  test("as a job user (rootless runc): the same refusal; the image is read with the user's rights", async () => {
    const bundle = bundleWith(["libmpich.so.12.2.2"], true);
    const lib = join(bundle, "rootfs", LIBDIR);
    chownSync(lib, NOBODY, NOBODY);
    const user = ["--uid", "nobody", "--gid", "nogroup", "-D", "/"];
    const r = await run(conf, bundle, ["true"], user);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`cannot run the image's MPICH ABI (${LIBDIR}/libmpich.so.12.2.2)`);
    // A rootfs the user cannot read (config.json's root.path naming a root-only dir) is not listed
    // for them: the step fails on runc's side, and nothing of that dir's content is shown.
    const secret = tempDir("jobrt-mpiabi-secret-");
    mkdirSync(join(secret, LIBDIR), { recursive: true });
    writeFileSync(join(secret, LIBDIR, "libmpich.so.12.9.9"), "");
    chmodSync(secret, 0o700);
    const file = join(bundle, "config.json");
    const config = JSON.parse(readFileSync(file, "utf8"));
    config.root.path = secret;
    writeFileSync(file, JSON.stringify(config));
    const hidden = await run(conf, bundle, ["true"], user);
    expect(hidden.code).not.toBe(0);
    expect(hidden.stderr).not.toContain("libmpich.so.12.9.9");
    expect(hidden.stderr).not.toContain("MPICH ABI");
  });
});
