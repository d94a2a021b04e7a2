/**
 * `jobrt runtimes` and `jobrt check` show the node's CDI devices (docs/devices.md, issue 27 item
 * 5): each name with its spec file, and what is wrong in the spec dirs as problems.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jobrt, jobrtBin, requires, tempDir } from "../helpers/jobrt.js";

/** A conf dir whose CdiSpecDirs are two fresh dirs: a good spec in the first, a bad one in the second. */
function site(extra = "", withBad = true): { env: NodeJS.ProcessEnv; good: string; bad: string; dirs: string[] } {
  const dir = tempDir("jobrt-cdi-conf-");
  const dirs = [join(dir, "etc-cdi"), join(dir, "run-cdi")];
  for (const d of dirs) mkdirSync(d, { mode: 0o755 });
  const good = join(dirs[0]!, "acme.json");
  // /dev/null stands in for a GPU node; /nonexistent/gpu2 is a node this node lacks.
  writeFileSync(
    good,
    JSON.stringify({
      cdiVersion: "0.6.0",
      kind: "acme.com/gpu",
      devices: [
        { name: "0", containerEdits: { deviceNodes: [{ path: "/dev/acme0", hostPath: "/dev/null" }] } },
        { name: "2", containerEdits: { deviceNodes: [{ path: "/dev/acme2", hostPath: "/nonexistent/gpu2" }] } },
      ],
    }),
  );
  const bad = join(dirs[1]!, "fpga.yaml");
  if (withBad) writeFileSync(bad, 'cdiVersion: "9.0.0"\nkind: acme.com/fpga\ndevices: []\n');
  writeFileSync(
    join(dir, "jobrt.conf"),
    `SpoolDir=${tempDir("jobrt-cdi-spool-")}\nCdiSpecDirs=${dirs.join(",")}\n${extra}`,
  );
  return { env: { ...process.env, JOBRT_CONF_DIR: dir }, good, bad, dirs };
}

const versionProblem = (bad: string) =>
  `CDI spec ${bad}: cdiVersion: "9.0.0" is not a CDI version jobrt reads (0.3.0, 0.4.0, 0.5.0, 0.6.0, 0.7.0, 0.8.0, 1.0.0, 1.1.0)`;
const nodeProblem = (good: string) =>
  `CDI spec ${good}: acme.com/gpu=2: device node /nonexistent/gpu2 does not exist on this node`;

describe("the node's CDI devices", () => {
  requires({ "a built jobrt (pnpm turbo run build)": existsSync(jobrtBin) });

  it("jobrt runtimes lists each device with its spec file, and the spec dirs' problems", async () => {
    const s = site();
    const r = await jobrt(["runtimes"], { env: s.env });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      [
        `CDI devices (spec dirs ${s.dirs.join(", ")}):`,
        `  acme.com/gpu=0  ${s.good}`,
        `  acme.com/gpu=2  ${s.good}`,
        `problem: ${versionProblem(s.bad)}`,
        `problem: ${nodeProblem(s.good)}`,
      ].join("\n"),
    );
  });

  it("jobrt runtimes --json has them under cdi", async () => {
    const s = site();
    const json = JSON.parse((await jobrt(["runtimes", "--json"], { env: s.env })).stdout) as { cdi: unknown };
    expect(json.cdi).toEqual({
      specDirs: s.dirs,
      devices: [
        { name: "acme.com/gpu=0", spec: s.good },
        { name: "acme.com/gpu=2", spec: s.good },
      ],
      problems: [versionProblem(s.bad), nodeProblem(s.good)],
    });
  });

  it("jobrt check shows them; a problem is said on stderr and fails the check only when a step would use devices", async () => {
    const s = site();
    const plain = await jobrt(["check", "true"], { env: s.env });
    expect(plain.stdout).toContain(
      `CDI devices (spec dirs ${s.dirs.join(", ")}):\n  acme.com/gpu=0  ${s.good}\n  acme.com/gpu=2  ${s.good}\n`,
    );
    expect(plain.stderr).toBe(`jobrt: problem: ${versionProblem(s.bad)}\njobrt: problem: ${nodeProblem(s.good)}\n`);
    expect(plain.code).toBe(0);
    const used = await jobrt(["check", "true"], { env: site("CdiDefaultDevices=acme.com/gpu=0\n").env });
    expect(used.stderr).toContain("jobrt: problem: CDI spec ");
    expect(used.code).toBe(1);
  });

  it("jobrt check resolves the request's device names as a step on this node would: an unknown one or one outside the allocation fails in one line", async () => {
    const s = site("", false);
    const unknown = await jobrt(["check", "--container-device", "acme.com/gpu=7", "true"], { env: s.env });
    expect(unknown.stderr).toContain(
      `jobrt: component 0: --container-device acme.com/gpu=7: no CDI spec describes it (spec dirs: ${s.dirs.join(", ")})\n`,
    );
    expect(unknown.code).toBe(1);
    const env = { ...site("CdiGresKind=acme.com/gpu\n", false).env, SLURM_STEP_GPUS: "1" };
    const outside = await jobrt(["check", "--container-device", "acme.com/gpu=0", "true"], { env });
    expect(outside.stderr).toContain(
      "jobrt: component 0: --container-device acme.com/gpu=0: not allocated to this step (SLURM_STEP_GPUS lists 1); use acme.com/gpu=gres\n",
    );
    expect(outside.code).toBe(1);
  });

  it("with no spec and no device asked for, jobrt check says nothing of devices; jobrt runtimes says none", async () => {
    const dir = tempDir("jobrt-cdi-none-");
    const env = { ...process.env, JOBRT_CONF_DIR: dir };
    writeFileSync(
      join(dir, "jobrt.conf"),
      `SpoolDir=${tempDir("jobrt-cdi-spool-")}\nCdiSpecDirs=${join(dir, "nothing")}\n`,
    );
    expect((await jobrt(["check", "true"], { env })).stdout).not.toContain("CDI");
    expect((await jobrt(["runtimes"], { env })).stdout).toContain(
      `CDI devices: none (spec dirs ${join(dir, "nothing")})\n`,
    );
  });
});
