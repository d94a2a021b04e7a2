/**
 * The host-side lookup of a task's command in the container's view (@jobrt/core's lookupCommand,
 * missingcommand.ts), on real directory trees: it says "missing" or "not-executable" only when
 * certain, and "unknown" for whatever it cannot see.
 */
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { lookupInConfig } from "../src/missingcommand.js";
import { tempDir } from "./host.js";

function rootfs(): string {
  const root = tempDir("oci-lookup-");
  for (const d of ["bin", "usr", "etc", "opt", "dev", "proc"]) mkdirSync(join(root, d));
  writeFileSync(join(root, "bin/tool"), "#!/bin/sh\n", { mode: 0o755 });
  return root;
}

const config = (root: string, args: string[], more: Record<string, unknown> = {}) => ({
  root: { path: root },
  process: { args, env: ["PATH=/usr/local/bin:/bin"], cwd: "/" },
  mounts: [
    { destination: "/proc", type: "proc", source: "proc" },
    { destination: "/dev", type: "tmpfs", source: "tmpfs", options: ["nosuid"] },
    { destination: "/dev/pts", type: "devpts", source: "devpts" },
  ],
  ...more,
});

describe("looking a command up in the container's view", () => {
  test("found on PATH, missing, and an absolute path that is missing", () => {
    const root = rootfs();
    expect(lookupInConfig(config(root, ["tool"])).kind).toBe("found");
    expect(lookupInConfig(config(root, ["nope"]))).toEqual({ kind: "missing" });
    expect(lookupInConfig(config(root, ["/opt/nope"]))).toEqual({ kind: "missing" });
    // A file where a directory is expected (ENOTDIR) is missing too.
    expect(lookupInConfig(config(root, ["/bin/tool/x"]))).toEqual({ kind: "missing" });
  });

  test("a bundle with hooks: unknown (a hook may create the command)", () => {
    const root = rootfs();
    const r = lookupInConfig(config(root, ["nope"], { hooks: { createContainer: [{ path: "/bin/true" }] } }));
    expect(r.kind).toBe("unknown");
  });

  test("under a mount whose content is not a host directory (tmpfs, proc, a masked path): unknown", () => {
    const root = rootfs();
    expect(lookupInConfig(config(root, ["/dev/nope"])).kind).toBe("unknown");
    expect(lookupInConfig(config(root, ["/dev/pts/nope"])).kind).toBe("unknown");
    expect(lookupInConfig(config(root, ["/proc/nope"])).kind).toBe("unknown");
    expect(lookupInConfig(config(root, ["/opt/nope"], { linux: { maskedPaths: ["/opt"] } })).kind).toBe("unknown");
  });

  test("a symlink loop, an unreadable relative PATH entry, a relative bind source: unknown", () => {
    const root = rootfs();
    symlinkSync("/bin/loop", join(root, "bin/loop"));
    expect(lookupInConfig(config(root, ["/bin/loop"])).kind).toBe("unknown");
    const relative = config(root, ["nope"]);
    relative.process.env = ["PATH=bin:/bin"];
    expect(lookupInConfig(relative).kind).toBe("unknown");
    // Found beats unknown: the relative entry does not matter when /bin has it.
    relative.process.args = ["tool"];
    expect(lookupInConfig(relative).kind).toBe("found");
    const bind = config(root, ["/opt/x/nope"]);
    bind.mounts.push({ destination: "/opt/x", type: "bind", source: "relative/dir", options: ["rbind"] });
    expect(lookupInConfig(bind).kind).toBe("unknown");
  });

  test("mount order: a later bind hides an earlier nested one; a nested one after its parent shows", () => {
    const root = rootfs();
    const outer = tempDir("oci-lookup-outer-");
    const inner = tempDir("oci-lookup-inner-");
    writeFileSync(join(inner, "innertool"), "", { mode: 0o755 });
    const bind = (destination: string, source: string) => ({ destination, type: "bind", source, options: ["rbind"] });
    const nestedLast = config(root, ["/opt/a/b/innertool"]);
    nestedLast.mounts.push(bind("/opt/a", outer), bind("/opt/a/b", inner));
    expect(lookupInConfig(nestedLast).kind).toBe("found");
    const nestedFirst = config(root, ["/opt/a/b/innertool"]);
    nestedFirst.mounts.push(bind("/opt/a/b", inner), bind("/opt/a", outer));
    expect(lookupInConfig(nestedFirst)).toEqual({ kind: "missing" });
  });

  test("a bind whose destination goes through a rootfs symlink lands where the symlink points", () => {
    const root = rootfs();
    mkdirSync(join(root, "usr/lib"));
    symlinkSync("usr/lib", join(root, "lib"));
    const tools = tempDir("oci-lookup-tools-");
    writeFileSync(join(tools, "bound"), "", { mode: 0o755 });
    const c = config(root, ["/usr/lib/tools/bound"]);
    c.mounts.push({ destination: "/lib/tools", type: "bind", source: tools, options: ["rbind"] });
    expect(lookupInConfig(c).kind).toBe("found");
  });

  test("not executable: a directory, a file without x bits; a file with some x bits counts as found", () => {
    const root = rootfs();
    writeFileSync(join(root, "bin/plain"), "", { mode: 0o644 });
    writeFileSync(join(root, "bin/owner-only"), "", { mode: 0o700 });
    chmodSync(join(root, "bin/owner-only"), 0o700);
    expect(lookupInConfig(config(root, ["plain"])).kind).toBe("not-executable");
    expect(lookupInConfig(config(root, ["/etc"])).kind).toBe("not-executable");
    expect(lookupInConfig(config(root, ["owner-only"])).kind).toBe("found");
  });
});
