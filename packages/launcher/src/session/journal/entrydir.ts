import { closeSync, constants, openSync, writeSync } from "node:fs";

/**
 * A step's journal entry, held open from its creation: every later write names its files through
 * the held descriptor (/proc/self/fd/N/NAME), so an entry that a task of the step renamed and
 * replaced with a symlink is never written through (docs/reliability.md); the paths the spool is
 * listed and removed by stay as they were.
 */
export interface EntryDir {
  /** NAME inside the entry as created, whatever is at its path now. */
  at(name: string): string;
  /** Appends to NAME (created 0600), never through a symlink at NAME; false when it cannot. */
  append(name: string, text: string): boolean;
  close(): void;
}

export function openEntryDir(path: string): EntryDir {
  let fd: number | undefined = openSync(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  const at = (name: string) => {
    if (fd === undefined) throw new Error(`journal entry ${path} is closed`);
    return `/proc/self/fd/${fd}/${name}`;
  };
  return {
    at,
    append(name, text) {
      let file: number | undefined;
      try {
        file = openSync(
          at(name),
          constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW,
          0o600,
        );
        writeSync(file, text);
        return true;
      } catch {
        return false;
      } finally {
        if (file !== undefined) closeSync(file);
      }
    },
    close() {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}
