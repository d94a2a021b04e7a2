import { chownSync, mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import type { LoadedRuntime, StepRecord } from "@jobrt/core";
import { addWireupEdits, wireupEdits, wireupKind } from "../src/session/wireup/wireupedits.js";

const dir = tempDir("jobrt-wireup-");
const server = join(dir, "spool", "pmix.4.0");
mkdirSync(server, { recursive: true });
symlinkSync(server, join(dir, "link"));

const oci = { name: "oci", capabilities: ["container", "pass-fds"], accepts: ["value", "devices"] };
const pmix = (more: Record<string, string> = {}) => ({
  SLURM_MPI_TYPE: "pmix",
  PMIX_SERVER_TMPDIR: server,
  PMIX_SYSTEM_TMPDIR: dir,
  ...more,
});
const SHM = {
  hostPath: "/dev/shm",
  containerPath: "/dev/shm",
  options: ["rbind", "rw", "nosuid", "nodev"],
  reason: "MPI wire-up (shared memory)",
};

describe("what a step's MPI wire-up needs of a container (docs/mpi.md)", () => {
  it("the wire-up kind: SLURM_MPI_TYPE first, else the variables each plugin sets", () => {
    expect(wireupKind({ SLURM_MPI_TYPE: "pmix_v4" })).toBe("pmix");
    expect(wireupKind({ SLURM_MPI_TYPE: "pmi2" })).toBe("pmi2");
    expect(wireupKind({ PMI_FD: "5" })).toBe("pmi2");
    expect(wireupKind({ PMIX_RANK: "0" })).toBe("pmix");
    expect(wireupKind({ SLURM_MPI_TYPE: "none" })).toBe("none");
  });

  it("PMIx: both directories bound at the same paths, the outer one first, then /dev/shm; the host's namespaces", () => {
    expect(wireupEdits(pmix(), oci, false)).toEqual({
      mounts: [
        ...[
          [dir, "PMIX_SYSTEM_TMPDIR"],
          [server, "PMIX_SERVER_TMPDIR"],
        ].map(([p, v]) => ({ ...SHM, hostPath: p, containerPath: p, reason: `MPI wire-up (${v})` })),
        SHM,
      ],
      hostNamespaces: ["network", "ipc", "pid", "uts"],
    });
  });

  it("PMI-2: no directory, /dev/shm and the namespaces", () => {
    expect(wireupEdits({ SLURM_MPI_TYPE: "pmi2", PMI_FD: "3" }, oci, false)?.mounts).toEqual([SHM]);
  });

  it("nothing for a step without wire-up or for a runtime whose tasks are host processes", () => {
    expect(wireupEdits({ SLURM_MPI_TYPE: "none" }, oci, false)).toBeUndefined();
    expect(wireupEdits(pmix(), { name: "none", capabilities: ["pmi-fd"], accepts: [] }, false)).toBeUndefined();
  });

  it("a container runtime that applies no edits: refused under PMIx in one line, left alone under PMI-2", () => {
    const bare = { name: "box", capabilities: ["container"], accepts: ["value"] };
    expect(() => wireupEdits(pmix(), bare, false)).toThrow(
      /^MPI wire-up: runtime box cannot bind Slurm's PMIx directories into its containers \(its meta.accepts has no "devices"/,
    );
    expect(wireupEdits({ SLURM_MPI_TYPE: "pmi2" }, bare, false)).toBeUndefined();
  });

  it.each([
    ["unset", { PMIX_SERVER_TMPDIR: "" }, /PMIX_SERVER_TMPDIR is not set/],
    ["relative", { PMIX_SERVER_TMPDIR: "spool/pmix" }, /PMIX_SERVER_TMPDIR="spool\/pmix" is not an absolute path/],
    ["missing", { PMIX_SYSTEM_TMPDIR: join(dir, "gone") }, /PMIX_SYSTEM_TMPDIR=\S+gone does not exist/],
    ["a symlink", { PMIX_SERVER_TMPDIR: join(dir, "link") }, /PMIX_SERVER_TMPDIR=\S+link is not a directory/],
  ])("a PMIx directory %s: one line naming the variable, nothing bound", (_what, change, message) => {
    const env: Record<string, string> = pmix(change);
    if (env.PMIX_SERVER_TMPDIR === "") delete env.PMIX_SERVER_TMPDIR;
    expect(() => wireupEdits(env, oci, false)).toThrow(message);
  });

  it("as root, a directory under one a job user owns is refused (they could swap it for a symlink)", () => {
    const theirs = join(dir, "theirs");
    mkdirSync(join(theirs, "pmix.4.0"), { recursive: true });
    // As root the directory is given to nobody; otherwise it is this user's, not root's, already.
    if (process.geteuid?.() === 0) chownSync(theirs, 65534, 65534);
    expect(() => wireupEdits(pmix({ PMIX_SERVER_TMPDIR: join(theirs, "pmix.4.0") }), oci, true)).toThrow(
      /^MPI wire-up: PMIX_SERVER_TMPDIR=\S+pmix\.4\.0: \S+ belongs to uid \d+, not root, so the PMIx directories cannot be bound/,
    );
    expect(wireupEdits(pmix({ PMIX_SERVER_TMPDIR: join(theirs, "pmix.4.0") }), oci, false)?.mounts).toHaveLength(3);
  });

  it("a container runtime's step without a container request: refused under PMIx, left alone under PMI-2", () => {
    const record = (env: Record<string, string>) => ({ record: { env, tasks: [{ env }] } as unknown as StepRecord });
    const runtime = () => ({ ...oci, name: "bwrap" }) as unknown as LoadedRuntime;
    expect(() => addWireupEdits([record(pmix())], runtime)).toThrow(
      /^MPI wire-up: runtime bwrap runs its tasks in a sandbox of its own, and a step without --container gives it no container request/,
    );
    const pmi2 = record({ SLURM_MPI_TYPE: "pmi2" });
    addWireupEdits([pmi2], runtime);
    expect(pmi2.record.container).toBeUndefined();
    // A host-process runtime's task sees the directories as they are: nothing to refuse.
    addWireupEdits(
      [record(pmix())],
      () => ({ name: "none", capabilities: ["pmi-fd"], accepts: [] }) as unknown as LoadedRuntime,
    );
  });
});
