/**
 * lookupCommand's mounts of a fresh, empty file system (ViewMount.empty: bwrap's --tmpfs): what is
 * under one is certainly missing when the command is executed, but for the binds made under it.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { type ContainerView, lookupCommand } from "../src/commandlookup.js";

function view(): ContainerView {
  const root = tempDir("core-lookup-");
  for (const d of ["bin", "tmp", "proc"]) mkdirSync(join(root, d));
  writeFileSync(join(root, "bin/tool"), "#!/bin/sh\n", { mode: 0o755 });
  // On the host the rootfs's own /tmp holds the command: the tmpfs hides it.
  writeFileSync(join(root, "tmp/hidden"), "#!/bin/sh\n", { mode: 0o755 });
  const work = tempDir("core-lookup-work-");
  writeFileSync(join(work, "mine"), "#!/bin/sh\n", { mode: 0o755 });
  return {
    root,
    mounts: [
      { destination: "/proc" },
      { destination: "/tmp", empty: true },
      { destination: "/tmp/a/work", source: work },
    ],
  };
}

describe("lookupCommand: an empty mount", () => {
  test("a PATH entry inside it holds nothing: a command found nowhere else is missing, not unknown", () => {
    expect(lookupCommand(view(), "nope", "/tmp/x/node_modules/.bin:/bin", "/")).toEqual({ kind: "missing" });
    expect(lookupCommand(view(), "tool", "/tmp/x/.bin:/bin", "/")).toEqual({ kind: "found", path: "/bin/tool" });
  });

  test("what the host has below its destination is hidden; a bind made under it is seen", () => {
    expect(lookupCommand(view(), "/tmp/hidden", "/bin", "/")).toEqual({ kind: "missing" });
    expect(lookupCommand(view(), "/tmp/a/work/mine", "/bin", "/")).toEqual({ kind: "found", path: "/tmp/a/work/mine" });
    expect(lookupCommand(view(), "mine", "/bin", "/tmp/a/work")).toEqual({ kind: "missing" });
    expect(lookupCommand(view(), "./mine", "/bin", "/tmp/a/work")).toEqual({ kind: "found", path: "/tmp/a/work/mine" });
  });

  test("its root is a directory; a mount whose content is unknown stays unknown", () => {
    expect(lookupCommand(view(), "/tmp", "/bin", "/")).toEqual({ kind: "not-executable", path: "/tmp" });
    // The directory the runtime made for the bind below it.
    expect(lookupCommand(view(), "/tmp/a", "/bin", "/")).toEqual({ kind: "not-executable", path: "/tmp/a" });
    expect(lookupCommand(view(), "/tmp/b", "/bin", "/")).toEqual({ kind: "missing" });
    expect(lookupCommand(view(), "/proc/nope", "/bin", "/").kind).toBe("unknown");
  });
});
