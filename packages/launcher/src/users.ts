import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { jobrtError } from "@jobrt/core";

export interface UserIdentity {
  uid: number;
  gid: number;
  user: string;
  home: string;
}

/** The entry for a name or numeric id in /etc/passwd or /etc/group, read directly. */
function fromFile(db: "passwd" | "group", key: string): string[] | undefined {
  try {
    for (const line of readFileSync(`/etc/${db}`, "utf8").split("\n")) {
      const fields = line.split(":");
      if (fields[0] === key || fields[2] === key) return fields;
    }
  } catch {
    // no such file: ask NSS
  }
  return undefined;
}

/**
 * Looks up a user or group: the local file first (a process start costs milliseconds on every
 * `jobrt exec`), then NSS through getent for directory users (LDAP, SSSD).
 */
function getent(db: "passwd" | "group", key: string): string[] | undefined {
  const local = fromFile(db, key);
  if (local) return local;
  try {
    const out = execFileSync("getent", [db, key], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    const line = out.split("\n")[0];
    return line ? line.split(":") : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The largest id a task can be started as: Linux ids are 32-bit with (uid_t)-1 reserved, but
 * Node's spawn takes only int32 ids, so ids above 2^31-1 cannot be switched to.
 */
export const MAX_ID = 2 ** 31 - 1;

/** A user-given name or number, shortened for a message. */
const shown = (spec: string) => JSON.stringify(spec.length > 64 ? `${spec.slice(0, 64)}...` : spec);

/** An id from the command line or a passwd/group entry, checked before anything starts. */
function checkedId(text: string | undefined, subject: string): number {
  const id = text !== undefined && /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(id) || id > MAX_ID) {
    throw jobrtError("ERR_USAGE", { problem: `${subject} ${shown(text ?? "")} is not an id from 0 to ${MAX_ID}` });
  }
  return id;
}

/** Looks a user up by name or number through NSS (getent), as srun --uid does. */
export function lookupUser(spec: string): UserIdentity {
  if (/^\d+$/.test(spec)) checkedId(spec, "--uid:");
  const entry = getent("passwd", spec);
  if (!entry || entry.length < 7) {
    if (/^\d+$/.test(spec)) {
      // A numeric uid with no passwd entry still runs, like Slurm; it gets no home.
      const uid = Number(spec);
      return { uid, gid: uid, user: spec, home: "/" };
    }
    throw jobrtError("ERR_USAGE", { problem: `--uid: no such user ${shown(spec)}` });
  }
  return {
    user: entry[0]!,
    uid: checkedId(entry[2], `--uid: user ${shown(spec)} has uid`),
    gid: checkedId(entry[3], `--uid: user ${shown(spec)} has gid`),
    home: entry[5] || "/",
  };
}

export function lookupGroup(spec: string): number {
  if (/^\d+$/.test(spec)) return checkedId(spec, "--gid:");
  const entry = getent("group", spec);
  if (!entry || entry.length < 3) throw jobrtError("ERR_USAGE", { problem: `--gid: no such group ${shown(spec)}` });
  return checkedId(entry[2], `--gid: group ${shown(spec)} has gid`);
}

/**
 * True when user `uid` may act with group `gid`: its primary group (passwd) or a group that lists
 * it as a member, as initgroups(3) would give it. Root's gc runs a job user's cleanup only with
 * such a group (docs/reliability.md, "Threat model").
 */
export function userHasGroup(uid: number, gid: number): boolean {
  const user = getent("passwd", String(uid));
  if (!user || user.length < 7) return false;
  if (user[3] === String(gid)) return true;
  const group = getent("group", String(gid));
  return group !== undefined && group[2] === String(gid) && (group[3] ?? "").split(",").includes(user[0]!);
}

/** Who the host runs as. */
export function currentUser(): UserIdentity {
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  const entry = getent("passwd", String(uid));
  return {
    uid,
    gid,
    user: entry?.[0] ?? process.env.USER ?? String(uid),
    home: entry?.[5] ?? process.env.HOME ?? "/",
  };
}

/**
 * Who a step's tasks run as, from srun's --uid and --gid (a name or a number each): the host's own
 * user when neither is given; root may name anyone, anyone else only themselves.
 */
export function jobUser(uid: string | undefined, gid: string | undefined): UserIdentity {
  const me = currentUser();
  if (uid === undefined && gid === undefined) return me;
  const user = uid !== undefined ? lookupUser(uid) : { ...me };
  if (gid !== undefined) user.gid = lookupGroup(gid);
  if (me.uid !== 0 && (user.uid !== me.uid || user.gid !== me.gid)) {
    throw jobrtError("ERR_USAGE", { problem: "--uid/--gid: only root may run tasks as another user or group" });
  }
  return user;
}
