import { readdirSync, realpathSync, statSync } from "node:fs";
import { basename, posix } from "node:path";
import type { DeviceEdits } from "./devices.js";

/**
 * The host's MPI brought into an image by device edits (a site's CDI spec binding its MPI
 * libraries: docs/mpi.md, "The host's MPI in the container") against the MPI the image was built
 * with. An MPI library is known by its file name, the way Sarus checks it: `libmpi.so.12` and
 * `libmpich.so.12` are the MPICH ABI (MPICH, MVAPICH, Intel MPI, Cray MPICH: one ABI across
 * releases); `libmpi.so.40` is Open MPI 3 to 5, whose ABI holds only within one release series,
 * told apart by the library's libtool age (40.0x and 40.1x: 3.x, 40.2x and 40.3x: 4.x, 40.4x: 5.x).
 */
interface MpiLibrary {
  /** The file name, the most specific one seen (libmpi.so.40.30.4 rather than libmpi.so.40). */
  file: string;
  /** The directory it was found in: a host path, or a path in the image. */
  dir: string;
  family: "MPICH ABI" | "Open MPI";
  /** Open MPI's release series (4 for 4.1.x); the soname's major for the MPICH ABI. */
  series: number;
}

const MPI_FILE_RE = /^lib(mpi|mpich)\.so\.(\d+)((?:\.\d+)*)$/;

/** The MPI a library file name belongs to, or undefined for any other file. */
function mpiLibraryOf(file: string, dir: string): MpiLibrary | undefined {
  const m = MPI_FILE_RE.exec(file);
  if (!m) return undefined;
  const major = Number(m[2]);
  if (major === 12) return { file, dir, family: "MPICH ABI", series: 12 };
  // Open MPI 1.10 also named its library libmpi.so.12 (taken as the MPICH ABI here), and older
  // ones libmpi.so.0, .1 and .20: not known to this check.
  if (m[1] !== "mpi" || major !== 40) return undefined;
  const age = Number((m[3] ?? "").split(".")[1] ?? Number.NaN);
  if (!Number.isInteger(age)) return { file, dir, family: "Open MPI", series: Number.NaN };
  return { file, dir, family: "Open MPI", series: age < 20 ? 3 : age < 40 ? 4 : 5 };
}

/** The one that says most: a name with a version beats the bare soname. */
function mostSpecific(libs: MpiLibrary[]): MpiLibrary | undefined {
  return [...libs].sort((a, b) => b.file.length - a.file.length)[0];
}

/** The library names a mount source holds: a directory's entries, or a file's own (real) name. */
function namesAt(hostPath: string): { dir: string; names: string[]; isDir: boolean } {
  try {
    if (statSync(hostPath).isDirectory()) return { dir: hostPath, names: readdirSync(hostPath), isDir: true };
    // The bound file's own name has its full version (libmpi.so.40 -> libmpi.so.40.30.4).
    const real = realpathSync(hostPath);
    return { dir: posix.dirname(real), names: [basename(real)], isDir: false };
  } catch {
    return { dir: hostPath, names: [], isDir: false };
  }
}

/**
 * The MPI libraries the edits bind, each with where it lands in the container. The mount sources
 * are the site's (a root host has checked them: docs/devices.md), so they are read as they are.
 */
function injectedMpi(edits: DeviceEdits): { lib: MpiLibrary; containerDir: string }[] {
  const out: { lib: MpiLibrary; containerDir: string }[] = [];
  for (const m of edits.mounts) {
    // The host's own binds (MPI wire-up's /dev/shm and PMIx dirs) hold what job users put there.
    if (m.reason !== undefined) continue;
    const { dir, names, isDir } = namesAt(m.hostPath);
    const libs = names.map((n) => mpiLibraryOf(n, dir)).filter((l): l is MpiLibrary => l !== undefined);
    const lib = mostSpecific(libs);
    if (lib) out.push({ lib, containerDir: isDir ? m.containerPath : posix.dirname(m.containerPath) });
  }
  return out;
}

/** Where an image keeps the libraries its programs load (ld.so's defaults and Debian's multiarch dirs). */
const IMAGE_LIBRARY_DIRS = [
  "/lib",
  "/lib64",
  "/usr/lib",
  "/usr/lib64",
  "/usr/local/lib",
  "/lib/x86_64-linux-gnu",
  "/usr/lib/x86_64-linux-gnu",
  "/lib/aarch64-linux-gnu",
  "/usr/lib/aarch64-linux-gnu",
];

/** `Open MPI 4.x`, or the family alone where the name gives no series. */
const mpiName = (lib: MpiLibrary) =>
  `${lib.family}${lib.family === "Open MPI" && Number.isInteger(lib.series) ? ` ${lib.series}.x` : ""}`;

const describe = (lib: MpiLibrary) => `${mpiName(lib)} (${posix.join(lib.dir, lib.file)})`;

function compatible(host: MpiLibrary, image: MpiLibrary): boolean {
  if (host.family !== image.family) return false;
  // A bare libmpi.so.40 does not say its series: not known to clash.
  return (
    host.family === "MPICH ABI" ||
    Number.isNaN(host.series) ||
    Number.isNaN(image.series) ||
    host.series === image.series
  );
}

/**
 * Why the host's MPI that `edits` bind cannot run the image's MPI programs, in one line naming
 * both; undefined when the edits bind no MPI, the image has none, or has one the host's can run.
 * `listImageDir` lists a directory of the image as the container sees it (core's
 * listContainerDir, run as the job user where the image is theirs); `image` names the image in the
 * message. Since core 2.1.0.
 */
export function injectedMpiProblem(
  edits: DeviceEdits,
  listImageDir: (dir: string) => string[] | undefined,
  image: string,
): string | undefined {
  const injected = injectedMpi(edits);
  if (injected.length === 0) return undefined;
  const dirs = [...new Set([...IMAGE_LIBRARY_DIRS, ...injected.map((i) => i.containerDir)])];
  const found: MpiLibrary[] = [];
  for (const dir of dirs) {
    const libs = (listImageDir(dir) ?? []).map((n) => mpiLibraryOf(n, dir)).filter((l) => l !== undefined);
    // A soname link beside its versioned file is that file: one library per family in a dir.
    for (const family of ["MPICH ABI", "Open MPI"]) {
      const lib = mostSpecific(libs.filter((l) => l.family === family));
      if (lib) found.push(lib);
    }
  }
  for (const { lib: host } of injected) {
    // An image with several MPIs (Debian's MPICH and Open MPI side by side) runs programs of
    // either: only one without any that the host's can stand in for is refused.
    if (found.some((image) => compatible(host, image))) continue;
    const clash = mostSpecific(found);
    if (clash)
      return `the host's MPI that --container-device ${edits.devices.join(",")} brings, ${describe(host)}, cannot run the image's ${describe(clash)} in ${image}: use an image built with ${mpiName(host)}, or leave the device out to run the image's own MPI`;
  }
  return undefined;
}
