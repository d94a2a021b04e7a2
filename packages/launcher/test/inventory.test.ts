import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { cdiInventory } from "../src/devices/inventory.js";

let root: string;
let dirs: string[];
beforeEach(() => {
  root = tempDir("jobrt-cdi-inventory-");
  dirs = [join(root, "etc"), join(root, "run")];
  for (const d of dirs) mkdirSync(d, { mode: 0o755 });
});

function spec(dir: number, file: string, kind: string, names: string[], hostPath = "/dev/null"): string {
  const path = join(dirs[dir]!, file);
  writeFileSync(
    path,
    JSON.stringify({
      cdiVersion: "0.6.0",
      kind,
      devices: names.map((name) => ({ name, containerEdits: { deviceNodes: [{ path: `/dev/x${name}`, hostPath }] } })),
    }),
  );
  return path;
}

describe("the node's CDI inventory (jobrt check, jobrt runtimes)", () => {
  it("lists each device once, from the spec that wins (a later dir over an earlier), sorted", () => {
    const a = spec(0, "a.json", "acme.com/gpu", ["1", "0"]);
    const b = spec(1, "b.json", "acme.com/gpu", ["1"]);
    expect(cdiInventory({ specDirs: dirs }, false)).toEqual({
      specDirs: dirs,
      devices: [
        { name: "acme.com/gpu=0", spec: a },
        { name: "acme.com/gpu=1", spec: b },
      ],
      problems: [],
    });
  });

  it("a bad file is a problem and the other files still list; two specs of one dir claiming a name; a missing node", () => {
    writeFileSync(join(dirs[0]!, "broken.yaml"), "cdiVersion: [\n");
    const a = spec(1, "a.json", "acme.com/gpu", ["0"]);
    const c = spec(1, "c.json", "acme.com/gpu", ["0"]);
    const m = spec(1, "m.json", "acme.com/fpga", ["0"], join(root, "no-such-node"));
    const got = cdiInventory({ specDirs: dirs }, false);
    expect(got.devices).toEqual([
      { name: "acme.com/fpga=0", spec: m },
      { name: "acme.com/gpu=0", spec: a },
    ]);
    expect(got.problems).toHaveLength(3);
    expect(got.problems[0]).toMatch(new RegExp(`^CDI spec ${join(dirs[0]!, "broken.yaml")}: `));
    expect(got.problems[1]).toBe(
      `CDI spec ${m}: acme.com/fpga=0: device node ${join(root, "no-such-node")} does not exist on this node`,
    );
    expect(got.problems[2]).toBe(
      `CDI spec ${c}: devices: acme.com/gpu=0 is also described by ${a} (two specs of one directory claim one name)`,
    );
  });
});
