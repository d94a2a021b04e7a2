import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { NodeConf, StepRecord } from "@jobrt/core";
import { describe, expect, it } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { claimJournal, openStepSpool } from "../src/session/journal/stepclaim.js";

describe("a jobrt exec task's journal entry", () => {
  it("is still made when another task's jobrt, ending, removed the idle journal dir after we opened the spool", () => {
    const logs: string[] = [];
    const node = {
      spoolDir: join(tempDir("jobrt-stepclaim-"), "spool"),
      nodeName: "n1",
      log: (_level: string, message: string) => logs.push(message),
    } as unknown as NodeConf;
    const record = { jobId: 7, stepId: 0, tasks: [{ globalId: 1, localId: 1 }] } as unknown as StepRecord;
    const plan = { mode: "exec", record } as const;
    const spool = openStepSpool(plan, node);
    expect(spool).toBeDefined();
    // What removeIdleJournal does at the other task's end: its node marker, then the empty dir.
    rmSync(spool!.jobsDir, { recursive: true });
    const journal = claimJournal(spool, plan, node);
    expect(logs).toEqual([]);
    expect(journal).toBeDefined();
    expect(existsSync(join(spool!.jobsDir, "node"))).toBe(true);
    expect(readdirSync(join(spool!.jobsDir, "7"))).toEqual([`exec-0.1.${process.pid}`]);
  });
});
