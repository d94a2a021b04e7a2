/**
 * The host's MPI bound in by device edits against the image's (docs/mpi.md, "The host's MPI in the
 * container"). The host side is this machine's real Debian libraries (Open MPI 4.1 and MPICH 4.0,
 * installed by scripts/system-deps.sh); an image is a directory holding files named as MPI
 * releases name their libraries, since only the names are read.
 */
import { existsSync, mkdirSync, readdirSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { describe, expect, test } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { listContainerDir } from "../src/commandlookup.js";
import type { DeviceEdits } from "../src/devices.js";
import { injectedMpiProblem } from "../src/mpiabi.js";

const LIBDIR = "/usr/lib/x86_64-linux-gnu";
const HOST_OMPI = join(LIBDIR, "libmpi.so.40");
const HOST_MPICH = join(LIBDIR, "libmpich.so.12");

function edits(...mounts: [string, string][]): DeviceEdits {
  return {
    devices: ["site.example/mpi=host"],
    deviceNodes: [],
    mounts: mounts.map(([hostPath, containerPath]) => ({ hostPath, containerPath, options: ["ro", "bind"] })),
    env: [],
    additionalGids: [],
    hooks: [],
  };
}

/** A rootfs holding empty files of these names in `dir`. */
function image(files: string[], dir = LIBDIR): string {
  const root = tempDir("core-mpiabi-image-");
  mkdirSync(join(root, dir), { recursive: true });
  for (const f of files) writeFileSync(join(root, dir, f), "");
  return root;
}

const problem = (e: DeviceEdits, root: string) =>
  injectedMpiProblem(e, (dir) => listContainerDir({ root, mounts: [] }, dir), root);

describe("the host's MPI against the image's", () => {
  test("the host's libraries are the real ones this machine has", () => {
    expect(realpathSync(HOST_OMPI)).toMatch(/libmpi\.so\.40\.30\.\d+$/);
    expect(realpathSync(HOST_MPICH)).toMatch(/libmpich\.so\.12\.\d+\.\d+$/);
  });

  test("host Open MPI into an MPICH image: refused in one line naming both", () => {
    const root = image(["libmpich.so.12", "libmpich.so.12.2.2"]);
    const p = problem(edits([HOST_OMPI, `${LIBDIR}/libmpi.so.40`]), root);
    expect(p).toBe(
      `the host's MPI that --container-device site.example/mpi=host brings, Open MPI 4.x (${LIBDIR}/${basename(realpathSync(HOST_OMPI))}), cannot run the image's MPICH ABI (${LIBDIR}/libmpich.so.12.2.2) in ${root}: use an image built with Open MPI 4.x, or leave the device out to run the image's own MPI`,
    );
    expect(p).not.toContain("\n");
  });

  test("host Open MPI 4 into an Open MPI 5 image: refused; into an Open MPI 4.0 image: allowed", () => {
    const five = image(["libmpi.so.40", "libmpi.so.40.40.7"]);
    expect(problem(edits([HOST_OMPI, `${LIBDIR}/libmpi.so.40`]), five)).toContain(
      `cannot run the image's Open MPI 5.x (${LIBDIR}/libmpi.so.40.40.7)`,
    );
    const four = image(["libmpi.so.40", "libmpi.so.40.20.0"]);
    expect(problem(edits([HOST_OMPI, `${LIBDIR}/libmpi.so.40`]), four)).toBeUndefined();
  });

  test("host MPICH into an image of another MPICH-ABI MPI (libmpi.so.12, as Intel MPI names it): allowed", () => {
    const root = image(["libmpi.so.12", "libmpi.so.12.0.0"], "/opt/intel/mpi/lib");
    expect(problem(edits([HOST_MPICH, `${LIBDIR}/libmpich.so.12`]), root)).toBeUndefined();
    const ompi = image(["libmpi.so.40.30.1"], "/usr/local/lib");
    expect(problem(edits([HOST_MPICH, `${LIBDIR}/libmpich.so.12`]), ompi)).toContain(
      "MPICH ABI (/usr/lib/x86_64-linux-gnu/libmpich.so.12.",
    );
  });

  test("an image with MPICH and Open MPI side by side takes either; with MPICH and Open MPI 5 it takes no Open MPI 4", () => {
    const both = image(["libmpich.so.12.1.1", "libmpi.so.40.30.2"]);
    expect(problem(edits([HOST_OMPI, `${LIBDIR}/libmpi.so.40`]), both)).toBeUndefined();
    const neither = image(["libmpich.so.12.1.1", "libmpi.so.40.40.2"]);
    expect(problem(edits([HOST_OMPI, `${LIBDIR}/libmpi.so.40`]), neither)).toContain("cannot run the image's");
  });

  test("a directory of the host's libraries bound at a path of its own: its MPI is found, and the image's dir there too", () => {
    const site = tempDir("core-mpiabi-site-");
    symlinkSync(realpathSync(HOST_OMPI), join(site, basename(realpathSync(HOST_OMPI))));
    const root = image(["libmpich.so.12.2.2"], "/opt/hostmpi");
    expect(problem(edits([site, "/opt/hostmpi"]), root)).toContain(
      `Open MPI 4.x (${site}/${basename(realpathSync(HOST_OMPI))})`,
    );
  });

  test("the image's symlinks are followed inside the image, never on the host", () => {
    // /usr/lib64 -> /srv/libs (absolute): the image's own /srv/libs, which on the host does not exist.
    const root = image(["libmpich.so.12.2.2"], "/srv/libs");
    expect(existsSync("/srv/libs")).toBe(false);
    mkdirSync(join(root, "usr"), { recursive: true });
    symlinkSync("/srv/libs", join(root, "usr/lib64"));
    expect(problem(edits([HOST_OMPI, `${LIBDIR}/libmpi.so.40`]), root)).toContain(
      "MPICH ABI (/usr/lib64/libmpich.so.12.2.2)",
    );
    // /usr/lib -> ../../../../../../../usr/lib climbs no higher than the image's / (where it is a
    // loop): on the host it would be the host's /usr/lib and its MPICH.
    const climb = tempDir("core-mpiabi-climb-");
    mkdirSync(join(climb, "usr"));
    symlinkSync("../../../../../../../usr/lib", join(climb, "usr/lib"));
    expect(readdirSync(LIBDIR).some((f) => f.startsWith("libmpich.so.12"))).toBe(true);
    expect(problem(edits([HOST_OMPI, `${LIBDIR}/libmpi.so.40`]), climb)).toBeUndefined();
  });

  test("the host's own binds (MPI wire-up's /dev/shm) are not the host's MPI, whatever a job user put in them", () => {
    // A job user's file in the node's /dev/shm named like MPICH must not refuse other users' Open MPI steps.
    const shm = tempDir("core-mpiabi-shm-");
    writeFileSync(join(shm, "libmpich.so.12.2.2"), "");
    const wireup = {
      hostPath: shm,
      containerPath: "/dev/shm",
      options: ["rbind"],
      reason: "MPI wire-up (shared memory)",
    };
    const e = { ...edits(), mounts: [wireup] };
    expect(problem(e, image(["libmpi.so.40.30.4"]))).toBeUndefined();
    // The same directory as a CDI device's bind is the host's MPI.
    expect(problem(edits([shm, "/dev/shm"]), image(["libmpi.so.40.30.4"]))).toContain("MPICH ABI");
  });

  test("edits binding no MPI, or an image with none: nothing to refuse", () => {
    expect(
      problem(edits([join(LIBDIR, "libc.so.6"), "/lib/libc.so.6"]), image(["libmpich.so.12.2.2"])),
    ).toBeUndefined();
    expect(problem(edits([HOST_OMPI, `${LIBDIR}/libmpi.so.40`]), image(["libc.so.6"]))).toBeUndefined();
  });
});
