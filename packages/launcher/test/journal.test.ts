import { readFileSync, readdirSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "../../../tests/helpers/tmp.js";
import { claimRunStep } from "../src/session/journal/journal.js";
import { openSpool } from "../src/session/journal/spool.js";

describe("a step's journal entry swapped for a symlink while the step runs", () => {
  it("is never written through: task pids, the forker and the record go to the entry as created", async () => {
    const spool = openSpool(join(tempDir("jobrt-journal-"), "spool"), "n1")!;
    const journal = claimRunStep(spool, 7);
    const outside = tempDir("jobrt-journal-outside-");
    for (const name of ["pids", "forker", "step.json"]) writeFileSync(join(outside, name), "keep\n");
    // What a task of the step can do to its own entry: move it away and put a link in its place.
    renameSync(journal.dir, `${journal.dir}.moved`);
    symlinkSync(outside, journal.dir);
    journal.recordTaskPid(process.pid);
    journal.recordForker(process.pid);
    journal.write({ nodeName: "n1", proctrack: { mode: "pgid" } as never, components: [], stepStates: {} });
    journal.release();
    for (const name of ["pids", "forker", "step.json"])
      expect(readFileSync(join(outside, name), "utf8")).toBe("keep\n");
    expect(readdirSync(outside).sort()).toEqual(["forker", "pids", "step.json"]);
    // The moved entry got what the journal wrote.
    expect(readFileSync(join(`${journal.dir}.moved`, "pids"), "utf8")).toMatch(new RegExp(`^${process.pid} \\d+\\n$`));
  });
});
