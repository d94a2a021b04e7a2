import { spawnSync } from "node:child_process";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { isJobrtError } from "@jobrt/core";
import { type PatternValues, expandPattern, findPatternProblem, quoteArgv } from "../src/pattern.js";

const values: PatternValues = {
  argv: ["sh", "-c", "echo it's"],
  bundle: "/b/bundle",
  envFile: "/spool/oci-job5-2/task-3/environment",
  jobId: 5,
  stepDir: "/spool/oci-job5-2",
  nodeName: "n1",
  pid: 4242,
  rootfs: "/b/bundle/rootfs",
  stepId: 2,
  taskId: 3,
  user: "alice",
  uid: 1000,
  cwd: "/home/alice",
};

/** What /bin/sh makes of a command: each printed argument, NUL-separated. */
function sh(command: string): string[] {
  const r = spawnSync("/bin/sh", ["-c", command], { encoding: "buffer" });
  expect(r.status, r.stderr.toString()).toBe(0);
  const out = r.stdout.toString("utf8");
  return out === "" ? [] : out.slice(0, -1).split("\0");
}

describe("the pattern table (runtime-oci.md, Patterns)", () => {
  test.each([
    ["%%", "%"],
    ["%b", "/b/bundle"],
    ["%e", "/spool/oci-job5-2/task-3/environment"],
    ["%j", "5"],
    ["%m", "/spool/oci-job5-2"],
    ["%n", "n1"],
    ["%p", "4242"],
    ["%r", "/b/bundle/rootfs"],
    ["%s", "2"],
    ["%t", "3"],
    ["%u", "alice"],
    ["%U", "1000"],
    ["%Z", "/home/alice"],
    ["%n.%u.%j.%s.%t", "n1.alice.5.2.3"],
    ["100%%%j", "100%5"],
  ])("%s → %s", (pattern, expected) => {
    expect(expandPattern(pattern, values, { shell: true })).toBe(expected);
  });
  test("%@ is Slurm's exact quoting", () => {
    expect(expandPattern("run %@", values, { shell: true })).toBe(`run 'sh' '-c' 'echo it'"'"'s'`);
    expect(quoteArgv([])).toBe("");
  });
  test("unknown values are errors, never text like (null) or -1", () => {
    const { pid: _p, taskId: _t, ...noTask } = values;
    let thrown: unknown;
    try {
      expandPattern("kill %p", noTask, { shell: true });
    } catch (e) {
      thrown = e;
    }
    // A catalog error: the callers (expand.ts, taskteardown.ts) match on the code.
    expect(isJobrtError(thrown, "ERR_CONF_PATTERN") && thrown.message).toBe(
      "%p (runtime process pid) is not known here",
    );
    expect(() => expandPattern("x.%t", noTask, { shell: true })).toThrow(/%t \(task id\) is not known here/);
    expect(expandPattern("x.%j", noTask, { shell: true })).toBe("x.5");
  });
  test("invalid sequences are found with their offset", () => {
    expect(findPatternProblem("ok %n %x")).toEqual({ index: 6, char: "x" });
    expect(findPatternProblem("end %")).toEqual({ index: 4, char: "" });
    expect(findPatternProblem("%%x %@")).toBeUndefined();
  });
  test("path patterns are not quoted", () => {
    expect(expandPattern("/spool/%u x", { ...values, user: "a b" }, { shell: false })).toBe("/spool/a b x");
  });
});

describe("quoting (W8)", () => {
  test("a bundle path with a space or $(...) stays one literal word in every quoting context", () => {
    for (const bundle of [
      "/tmp/my bundle",
      "/tmp/$(touch /tmp/pwned)",
      "/tmp/`id`",
      "/tmp/it's",
      '/tmp/q"uote',
      "/tmp/back\\slash",
    ]) {
      for (const pattern of [
        "printf '%%s\\0' %b",
        `printf '%%s\\0' "%b"`,
        "printf '%%s\\0' '%b'",
        "printf '%%s\\0' pre%b",
        `printf '%%s\\0' "pre %b post"`,
      ]) {
        const expected = pattern.includes('"pre')
          ? `pre ${bundle} post`
          : pattern.includes("pre%b")
            ? `pre${bundle}`
            : bundle;
        expect(sh(expandPattern(pattern, { ...values, bundle }, { shell: true })), `${pattern} with ${bundle}`).toEqual(
          [expected],
        );
      }
    }
  });
  const anyText = fc.string({ unit: "binary", maxLength: 40 }).filter((s) => !s.includes("\0"));
  test("property: %b, %Z, %u, %r and %e reach the shell byte-exact in unquoted, single- and double-quoted contexts", () => {
    fc.assert(
      fc.property(
        anyText,
        fc.constantFrom("b", "Z", "u", "r", "e", "m", "n"),
        fc.constantFrom("none", "single", "double"),
        (text, c, ctx) => {
          const key = { b: "bundle", Z: "cwd", u: "user", r: "rootfs", e: "envFile", m: "stepDir", n: "nodeName" }[
            c
          ] as keyof PatternValues;
          const v = { ...values, [key]: text };
          const word = ctx === "none" ? `x%${c}y` : ctx === "single" ? `'x%${c}y'` : `"x%${c}y"`;
          expect(sh(expandPattern(`printf '%%s\\0' ${word}`, v, { shell: true }))).toEqual([`x${text}y`]);
        },
      ),
      { numRuns: 150 },
    );
  });
  test("property: %@ gives the task argv back byte-exact through /bin/sh (quotes, newlines, $(), backticks, non-ASCII)", () => {
    const tricky = fc.constantFrom(
      "'",
      '"',
      "\n",
      "$(touch /tmp/pwned)",
      "`id`",
      "\\",
      "é",
      "日本",
      "🙂",
      " ",
      "\t",
      "*",
      "$HOME",
      "!",
    );
    const arg = fc.array(fc.oneof(anyText, tricky), { maxLength: 4 }).map((parts) => parts.join(""));
    fc.assert(
      fc.property(fc.array(arg, { minLength: 1, maxLength: 6 }), (argv) => {
        expect(sh(expandPattern("printf '%%s\\0' %@", { ...values, argv }, { shell: true }))).toEqual(argv);
      }),
      { numRuns: 150 },
    );
  });
});
