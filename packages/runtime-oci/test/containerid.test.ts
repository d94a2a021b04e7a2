import { describe, expect, test } from "vitest";
import { DEFAULT_CONTAINER_ID } from "../src/conf.js";
import { containerIds } from "../src/containerid.js";
import type { PatternValues } from "../src/pattern.js";

const values: PatternValues = {
  jobId: 5,
  stepId: 2,
  taskId: 3,
  nodeName: "n1",
  user: "alice",
  uid: 1000,
  bundle: "/spool/oci-job5-2/task-3",
  stepDir: "/spool/oci-job5-2",
  envFile: "/spool/oci-job5-2/task-3/environment",
  argv: [],
};

describe("containerIds: the word a task's runtime commands share that names its container", () => {
  test("Slurm's documented runc oci.conf: the id, not the runtime, its verbs, options or paths", () => {
    const id = "%n.%u.%j.%s.%t";
    const g = "runc --rootless=true --root=/run/user/%U/";
    expect(containerIds([`${g} create ${id} -b %b`, `${g} state ${id}`, `${g} delete --force ${id}`], values)).toEqual([
      "n1.alice.5.2.3",
    ]);
  });

  test("the embedded default's id; a slowed or wrapped create still names it", () => {
    const g = "runc --root /run/runc";
    const withId = { ...values, containerId: "jobrt.n1.1000.5.2" };
    expect(
      containerIds(
        [
          `sleep 1; ${g} run ${DEFAULT_CONTAINER_ID} -b %b`,
          `${g} state ${DEFAULT_CONTAINER_ID}`,
          `${g} delete --force ${DEFAULT_CONTAINER_ID}`,
        ],
        withId,
      ),
    ).toEqual(["jobrt.n1.1000.5.2.3"]);
  });

  test("a --container-id (%I) names the container even in a pattern without %t", () => {
    const withId = { ...values, containerId: "myapp" };
    expect(containerIds(["runc run %I -b %b", "runc state %I", "runc delete --force %I"], withId)).toEqual(["myapp"]);
  });

  test("words that do not change with the job, step and task are never ids (a static name, a constant, the node name)", () => {
    expect(containerIds(["runc create fixed -b %b", "runc state fixed", "runc delete fixed"], values)).toEqual([]);
    expect(containerIds(["runc --log-level %n create x%j.%t", "runc --log-level %n state x%j.%t"], values)).toEqual([
      "x5.3",
    ]);
  });

  test("a bare number, an option, . and .. are never ids, even when they change per task", () => {
    expect(containerIds(["runc create %j", "runc state %j"], values)).toEqual([]);
    expect(containerIds(["runc create --x%j", "runc state --x%j"], values)).toEqual([]);
    expect(containerIds(["runc create ..", "runc state .."], { ...values, nodeName: ".." })).toEqual([]);
  });

  test("only a word that every command contains: a per-task word of one command alone is not the id", () => {
    expect(
      containerIds(["runc create a%j.%t --pid-file p%t", "runc state a%j.%t", "runc delete a%j.%t"], values),
    ).toEqual(["a5.3"]);
  });

  test("a pattern that cannot be expanded without a pid is left out; no pattern at all gives no id", () => {
    expect(containerIds(["runc state c%j.%t", "kill %p", undefined], values)).toEqual(["c5.3"]);
    expect(containerIds([undefined], values)).toEqual([]);
  });

  test("a quoted value cannot smuggle an id-shaped word with a path or a space through", () => {
    const odd = { ...values, user: "a b/c" };
    expect(containerIds(["runc state %u.%j.%t", "runc delete %u.%j.%t"], odd)).toEqual([]);
    expect(containerIds(["runc state $X%j.%t", "runc delete $X%j.%t"], values)).toEqual([]);
  });

  test("quotes are read as /bin/sh reads them", () => {
    expect(containerIds([`runc state 'q%j.%t'`, `runc delete "q%j.%t"`, "runc kill q\\%j.%t"], values)).toEqual([
      "q5.3",
    ]);
  });
});
