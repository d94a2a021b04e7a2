import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { removeTree } from "../src/removetree.js";

const root = process.getuid?.() === 0;

/** Mounts as `mount args`; returns the unmount, which the test runs in its finally. */
function mount(args: string[]): () => void {
  const target = args[args.length - 1] as string;
  execFileSync("mount", args);
  return () => execFileSync("umount", ["-l", target]);
}

function outsideWithKeep(): string {
  const outside = tempDir("hs-outside-");
  writeFileSync(join(outside, "keep"), "x");
  return outside;
}

describe("removeTree", () => {
  test("removes a tree of files, links and dirs; a missing path is no problem", () => {
    const tree = tempDir("hs-tree-");
    mkdirSync(join(tree, "a", "b"), { recursive: true });
    writeFileSync(join(tree, "a", "b", "f"), "x");
    writeFileSync(join(tree, "g"), "y");
    expect(removeTree(tree)).toEqual([]);
    expect(existsSync(tree)).toBe(false);
    expect(removeTree(tree)).toEqual([]);
  });

  test("hostile: a symlink planted at a component is unlinked, its target untouched", () => {
    const outside = outsideWithKeep();
    const tree = tempDir("hs-tree-");
    mkdirSync(join(tree, "a"));
    symlinkSync(outside, join(tree, "a", "dir-link"));
    symlinkSync(join(outside, "keep"), join(tree, "file-link"));
    expect(removeTree(tree)).toEqual([]);
    expect(readFileSync(join(outside, "keep"), "utf8")).toBe("x");
    // The path given is itself a link to a dir: the link goes, never what it points at.
    const link = join(tempDir("hs-tree-"), "link");
    symlinkSync(outside, link);
    expect(removeTree(link)).toEqual([]);
    expect(existsSync(link)).toBe(false);
    expect(readFileSync(join(outside, "keep"), "utf8")).toBe("x");
  });

  test("hostile: a dir swapped for a symlink between two removals is never followed", () => {
    const outside = outsideWithKeep();
    const tree = tempDir("hs-tree-");
    mkdirSync(join(tree, "sub"));
    writeFileSync(join(tree, "sub", "keep"), "mine");
    renameSync(join(tree, "sub"), join(tree, "moved"));
    symlinkSync(outside, join(tree, "sub"));
    expect(removeTree(join(tree, "sub"))).toEqual([]);
    expect(readFileSync(join(outside, "keep"), "utf8")).toBe("x");
  });

  test.runIf(root)("hostile: a bind mount of the same file system below the tree leaves it whole and is named", () => {
    const outside = outsideWithKeep();
    const tree = tempDir("hs-tree-");
    mkdirSync(join(tree, "rootfs", "mnt"), { recursive: true });
    writeFileSync(join(tree, "other"), "y");
    const unmount = mount(["--bind", outside, join(tree, "rootfs", "mnt")]);
    try {
      expect(removeTree(tree)).toEqual([
        `${tree}: left in place, mounted below it: ${join(tree, "rootfs", "mnt")} (unmount, then remove it)`,
      ]);
      expect(existsSync(join(tree, "other"))).toBe(true);
      // Given the mount point's parent through a symlink: still seen (mountinfo holds real paths).
      const alias = join(tempDir("hs-alias-"), "alias");
      symlinkSync(join(tree, "rootfs"), alias);
      expect(removeTree(`${alias}/`)[0]).toContain("mounted below it");
    } finally {
      unmount();
    }
    expect(readFileSync(join(outside, "keep"), "utf8")).toBe("x");
    expect(removeTree(tree)).toEqual([]);
  });

  test.runIf(root)("hostile: a mount whose name mountinfo escapes is still seen", () => {
    const tree = tempDir("hs-tree-");
    const odd = join(tree, "a b\\c");
    mkdirSync(odd);
    const unmount = mount(["-t", "tmpfs", "tmpfs", odd]);
    try {
      expect(removeTree(tree)[0]).toContain("mounted below it");
      expect(existsSync(odd)).toBe(true);
    } finally {
      unmount();
    }
    expect(removeTree(tree)).toEqual([]);
  });
});
