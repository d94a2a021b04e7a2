/** A user whose rights a file operation runs with. */
export interface FileUser {
  uid: number;
  gid: number;
}

/**
 * Runs `fn` with the effective ids of `user`, so root does on the user's files only what the user
 * could do itself (docs/reliability.md, "Threat model"): a task's -i/-o/-e files, as slurmstepd
 * opens them, and every file operation on a job user's journal. The switch is synchronous and
 * undone before anything else runs on the event loop; `fn` must not await. Without a user, or
 * when this process is not root, `fn` runs as it is.
 */
export function asUser<T>(user: FileUser | undefined, fn: () => T): T {
  const root = process.geteuid?.() === 0;
  if (!user || !root || (user.uid === 0 && user.gid === 0)) return fn();
  const groups = process.getgroups?.() ?? [];
  // Inside the try: a switch that fails half-way (an id the system refuses) is undone too.
  try {
    process.setgroups?.([user.gid]);
    process.setegid?.(user.gid);
    process.seteuid?.(user.uid);
    return fn();
  } finally {
    process.seteuid?.(0);
    process.setegid?.(0);
    process.setgroups?.(groups);
  }
}
