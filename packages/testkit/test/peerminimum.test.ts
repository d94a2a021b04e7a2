import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type ExecSpec, definePlugin } from "@jobrt/core";
import { describe, expect, it } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { peerMinimumNotes, rangeMinimum } from "../src/peerminimum.js";

// A plugin that uses core API newer than its peer range's minimum installs against that older core
// without a peer warning and loses the feature there: the testkit says so (issue 40, item 1).

const spec = (extra: Partial<ExecSpec> = {}): ExecSpec => ({ argv: ["/bin/true"], env: {}, cwd: "/", ...extra });
const plain = definePlugin({ name: "p", type: "runtime/p", version: "1.0.0", accepts: [] }, {});

describe("peerMinimumNotes", () => {
  it("names an ExecSpec's supervise under ^2.0.0 and says which range to write", () => {
    const notes = peerMinimumNotes("^2.0.0", { plugin: plain, specs: [spec({ supervise: { stop: "child-group" } })] });
    expect(notes).toEqual([
      'it uses ExecSpec.supervise, added in @jobrt/core 2.1.0, but its peer range "^2.0.0" admits 2.0.0, which ignores it: raise peerDependencies "@jobrt/core" to "^2.1.0"',
    ]);
  });

  it("says nothing when the range's minimum has what the plugin uses, or when it uses nothing new", () => {
    const use = { plugin: plain, specs: [spec({ supervise: { stop: "child-group" } })] };
    expect(peerMinimumNotes("^2.1.0", use)).toEqual([]);
    expect(peerMinimumNotes("^2.0.0", { plugin: plain, specs: [spec()] })).toEqual([]);
  });

  it("sees hooks and capabilities too, and takes the lowest version a range admits", () => {
    const tools = definePlugin(
      { name: "t", type: "runtime/t", version: "1.0.0", capabilities: ["pmi-fd"], accepts: [] },
      { tools: () => [] },
    );
    expect(peerMinimumNotes("^3.0.0 || ^2.0.5", { plugin: tools, specs: [] })).toEqual([
      expect.stringContaining("it uses the tools hook, added in @jobrt/core 2.1.0"),
      expect.stringContaining(
        'it uses the "pmi-fd" capability, added in @jobrt/core 2.1.0, but its peer range "^3.0.0 || ^2.0.5" admits 2.0.5',
      ),
    ]);
    const passFds = definePlugin(
      { name: "p", type: "runtime/p", version: "1.0.0", capabilities: ["pass-fds"], accepts: [] },
      { tools: () => [] },
    );
    expect(peerMinimumNotes("^2.1.0", { plugin: passFds, specs: [] })).toEqual([]);
    expect(peerMinimumNotes("^2.0.0", { plugin: passFds, specs: [] })).toContainEqual(
      expect.stringContaining('it uses the "pass-fds" capability, added in @jobrt/core 2.1.0'),
    );
    expect(rangeMinimum(">=2.1.0 <3.0.0")).toBe("2.1.0");
    expect(rangeMinimum("2.x")).toBeUndefined();
  });
});

const here = dirname(fileURLToPath(import.meta.url));
const vitestBin = join(dirname(createRequire(import.meta.url).resolve("vitest/package.json")), "vitest.mjs");

function suiteWithPeer(range: string) {
  const dir = tempDir("jobrt-testkit-peer-");
  const packageJson = join(dir, "package.json");
  writeFileSync(
    packageJson,
    JSON.stringify({ name: "jobrt-runtime-peer", peerDependencies: { "@jobrt/core": range } }),
  );
  const r = spawnSync(process.execPath, [vitestBin, "run", "--config", join(here, "fixtures/vitest.config.ts")], {
    cwd: join(here, "fixtures"),
    encoding: "utf8",
    timeout: 240_000,
    env: { ...process.env, CI: "1", JOBRT_TESTKIT_SUITE: "peer.suite.ts", JOBRT_PEER_PACKAGE_JSON: packageJson },
  });
  return { ...r, packageJson };
}

describe("the conformance suite's peer.minimum note", () => {
  it("prints the note for a plugin whose capability is newer than its peer range's minimum, and passes", () => {
    const r = suiteWithPeer("^2.0.0");
    expect(r.status, r.stdout.slice(-3000)).toBe(0);
    expect(`${r.stdout}${r.stderr}`).toContain(
      `@jobrt/testkit: note: ${r.packageJson}: it uses the "pmi-fd" capability, added in @jobrt/core 2.1.0, but its peer range "^2.0.0" admits 2.0.0`,
    );
  }, 300_000);

  it("prints none when the peer range names that core", () => {
    const r = suiteWithPeer("^2.1.0");
    expect(r.status, r.stdout.slice(-3000)).toBe(0);
    expect(`${r.stdout}${r.stderr}`).not.toContain("@jobrt/testkit: note:");
  }, 300_000);
});
