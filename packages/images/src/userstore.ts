import { type Stats, lstatSync } from "node:fs";
import { join } from "node:path";
import { type JobrtError, jobrtError } from "@jobrt/core";
import { type DirOwner, makeDir, makeDirs, othersMayReplace } from "@jobrt/host-services";
import type { ImageSettings } from "./settings.js";
import { userStore } from "./store.js";

/**
 * `<CacheDir>/users/` as root makes it: sticky and writable by all, like /tmp and a SpoolDir
 * shared with job users (docs/slurm.md), because every task under Slurm is a rootless jobrt that
 * makes its own store there; the sticky bit keeps anyone from renaming or removing another's.
 */
const USERS_MODE = 0o1777;

/** One line naming images.conf's CacheDir (ERR_CONF), as SharedStore's checks name theirs. */
function cacheDirError(settings: ImageSettings, problem: string): JobrtError {
  return jobrtError(
    "ERR_CONF",
    { where: settings.file ?? "images.conf", problem: `CacheDir ${settings.cacheDir}: ${problem}` },
    { details: { key: "CacheDir" } },
  );
}

const siteFix = (users: string) => `the site makes it once, as root: install -d -m 1777 ${users}`;
const codeOf = (error: unknown) => (error as NodeJS.ErrnoException).code ?? (error as Error).message;
const modeOf = (st: Stats) => (st.mode & 0o7777).toString(8).padStart(4, "0");

/**
 * `<CacheDir>/users/<uid>/`, made when missing: by root for a job user (`owner`), else by the
 * user themselves (docs/runtime-oci.md, "The image cache"). A store that is not a real dir of
 * that uid is never used, as another user could have made it first to read or change what its
 * owner runs; a users/ that others could rename stores in is refused too. Each problem is one
 * line naming CacheDir and what the site does.
 */
export function makeUserStore(settings: ImageSettings, uid: number, owner?: DirOwner): string {
  const users = join(settings.cacheDir, "users");
  const store = userStore(settings.cacheDir, uid);
  const root = (process.geteuid?.() ?? -1) === 0;
  try {
    makeDirs(settings.cacheDir, 0o755);
    makeDirs(users, root ? USERS_MODE : 0o755);
  } catch (error) {
    const me = process.geteuid?.() ?? -1;
    throw cacheDirError(settings, `uid ${me} cannot make ${users} (${codeOf(error)}); ${siteFix(users)}`);
  }
  const usersProblem = usersDirProblem(users);
  if (usersProblem) throw cacheDirError(settings, usersProblem);
  try {
    makeDir(store, 0o700, owner, owner ? [owner.uid] : []);
  } catch (error) {
    throw cacheDirError(settings, storeProblem(store, users, uid, error));
  }
  return store;
}

/** users/ must be a real dir of root's or the host's; one others may write must be sticky. */
function usersDirProblem(users: string): string | undefined {
  const st = lstatSync(users);
  if (st.isSymbolicLink() || !st.isDirectory())
    return `${users} is not a directory (a symbolic link?): not used; root removes it and runs: install -d -m 1777 ${users}`;
  if (st.uid !== 0 && st.uid !== process.geteuid?.())
    return `${users} belongs to uid ${st.uid}: not used (that user could replace any store in it); root removes it (rm -r ${users}) and runs: install -d -m 1777 ${users}`;
  if (othersMayReplace(st))
    return `${users} (mode ${modeOf(st)}) lets others rename the stores in it: not used; ${siteFix(users)}`;
  return undefined;
}

function storeProblem(store: string, users: string, uid: number, error: unknown): string {
  let st: Stats;
  try {
    st = lstatSync(store);
  } catch {
    if (codeOf(error) === "EACCES") {
      const u = lstatSync(users);
      return `uid ${uid} cannot make its store ${store} in ${users} (uid ${u.uid}, mode ${modeOf(u)}); ${siteFix(users)}`;
    }
    return `cannot make ${store} (${codeOf(error)})`;
  }
  const remove = `root removes it (rm -r ${store}) and the next step makes it anew`;
  if (st.isSymbolicLink() || !st.isDirectory())
    return `${store} is not a directory (a symbolic link?): not used as uid ${uid}'s store; ${remove}`;
  if (st.uid !== uid)
    return `${store} belongs to uid ${st.uid}, not to uid ${uid}: not used (another user made it); ${remove}`;
  return `cannot use ${store} (${codeOf(error)})`;
}
