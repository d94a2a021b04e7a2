import { describe, expect, it } from "vitest";
import { pmixUserProblem } from "../src/pmixuser.js";

const PMIX = { PMIX_NAMESPACE: "slurm.pmix.4.0", PMIX_RANK: "0" };
/** A config.json as `runc spec --rootless` writes it once fitted to uid 1000 (or as root's). */
const config = (userns: boolean, uid?: number) => ({
  process: { user: uid === undefined ? {} : { uid, gid: uid } },
  linux: {
    namespaces: [{ type: "mount" }, ...(userns ? [{ type: "user" }] : [])],
    ...(userns ? { uidMappings: [{ containerID: 0, hostID: 1000, size: 1 }] } : {}),
  },
});

describe("a PMIx client in a rootless container (docs/mpi.md)", () => {
  it("root of its own user namespace: refused in one line naming both uids and the fixes", () => {
    expect(pmixUserProblem(config(true, 0), { env: PMIX, uid: 1000 })).toBe(
      "runtime oci runs this task as uid 0 of its own user namespace (rootless runc), and Slurm's PMIx server refuses a client whose uid is not the job's (1000), so MPI_Init would fail: use srun --mpi=pmi2 (an MPI with PMI-2, such as MPICH), or --runtime none",
    );
    // No process.user at all is uid 0 there, as runc takes it.
    expect(pmixUserProblem(config(true), { env: PMIX, uid: 1000 })).toMatch(/^runtime oci runs this task as uid 0 /);
  });

  it("nothing to say without PMIx, in the host's user namespace, or as the job's uid inside", () => {
    expect(pmixUserProblem(config(true, 0), { env: { PMI_FD: "3" }, uid: 1000 })).toBeUndefined();
    expect(pmixUserProblem(config(false, 0), { env: PMIX, uid: 0 })).toBeUndefined();
    expect(pmixUserProblem(config(false, 1000), { env: PMIX, uid: 1000 })).toBeUndefined();
    expect(pmixUserProblem(config(true, 1000), { env: PMIX, uid: 1000 })).toBeUndefined();
  });
});
