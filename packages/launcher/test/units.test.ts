import { PassThrough } from "node:stream";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isPerTask } from "../src/filepattern.js";
import { expandFilePattern, exportEnvironment, lookupUser, parseTimeLimit, planStep } from "../src/index.js";
import { functionSink, pipeLines } from "../src/lines.js";
import { forkRequest } from "../src/session/forker/forkerrequest.js";
import { decideTaskEnd } from "../src/session/task/supervision.js";
import { currentUser, jobUser, lookupGroup } from "../src/users.js";

describe("parseTimeLimit (Slurm's -t formats)", () => {
  it.each([
    ["10", 600],
    ["1:30", 90],
    ["1:00:05", 3605],
    ["2-0", 172800],
    ["1-2:03", 93780],
    ["1-02:03:04", 93784],
    ["0", undefined],
    ["INFINITE", undefined],
    ["unlimited", undefined],
  ])("%s → %s s", (text, seconds) => {
    expect(parseTimeLimit(text)).toBe(seconds);
  });

  it.each(["", "soon", "1:2:3:4", "-5", "1-", "1.5"])("%j is a usage error", (text) => {
    expect(() => parseTimeLimit(text)).toThrow(expect.objectContaining({ code: "ERR_USAGE" }));
  });
});

describe("file patterns (-o/-e/-i)", () => {
  const v = { jobId: 12, stepId: 3, taskId: 7, nodeName: "n1", nodeId: 0 };
  it("expands every srun pattern, with zero padding", () => {
    expect(expandFilePattern("out-%j.%s.%t.%N.%n.%%.%4t", "-o", v)).toBe("out-12.3.7.n1.0.%.0007");
    expect(isPerTask("x-%t")).toBe(true);
    expect(isPerTask("x-%3t")).toBe(true);
    expect(isPerTask("x-%%t")).toBe(false);
  });
  it("rejects an unknown pattern character, and %t where there is no task", () => {
    expect(() => expandFilePattern("x-%q", "--output", v)).toThrow(
      '--output: unknown pattern %q in "x-%q" (use %j %s %t %n %N %%)',
    );
    expect(() => expandFilePattern("x-%t", "--output", { ...v, taskId: undefined })).toThrow("%t has no value here");
  });
  it("bounds the padding width at Slurm's 10 with a usage error, not a giant string", () => {
    expect(expandFilePattern("x-%10t", "-o", v)).toBe("x-0000000007");
    for (const pattern of ["x-%11t", "x%999999999t", `x%${"9".repeat(400)}j`]) {
      expect(() => expandFilePattern(pattern, "--output", v)).toThrow(
        expect.objectContaining({
          code: "ERR_USAGE",
          message: expect.stringMatching(/^--output: padding width \d+(\.\.\.)? in %\d+(\.\.\.)?[tj] is more than 10$/),
        }),
      );
    }
  });
  it("property: text without % is left alone", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[^%]*$/), (s) => {
        expect(expandFilePattern(s, "-o", v)).toBe(s);
      }),
    );
  });
});

describe("--export", () => {
  const source = { A: "1", B: "2", PATH: "/bin" };
  it("ALL, NONE, names, NAME=value and ALL as an item", () => {
    expect(exportEnvironment("ALL", source)).toEqual(source);
    expect(exportEnvironment("NONE", source)).toEqual({});
    expect(exportEnvironment("A,C=x=y", source)).toEqual({ A: "1", C: "x=y" });
    expect(exportEnvironment("ALL,B=9", source)).toEqual({ A: "1", B: "9", PATH: "/bin" });
  });
  it("rejects names that are not identifiers", () => {
    expect(() => exportEnvironment("A-B", source)).toThrow('--export: "A-B" is not a variable name');
  });
});

describe("a task's environment (planStep)", () => {
  it("is the job environment, then HOME, USER, LOGNAME, then the Slurm variables: a later value wins in the first one's place", () => {
    const env = exportEnvironment("ALL", { A: "1", USER: "someone", SLURM_PROCID: "99", HOME: "/elsewhere", Z: "26" });
    const [c] = planStep(
      {
        jobId: 7,
        stepId: 3,
        user: { uid: 1000, gid: 100, user: "jo", home: "/home/jo" },
        components: [{ argv: ["/bin/true"], ntasks: 3, cwd: "/tmp", env, io: {} }],
      },
      "nodex",
      2,
    );
    const task = c!.record.tasks[2]!;
    const keys = Object.keys(task.env);
    expect(keys.slice(0, 6)).toEqual(["A", "USER", "SLURM_PROCID", "HOME", "Z", "LOGNAME"]);
    expect(keys.slice(6, 8)).toEqual(["SLURM_JOB_ID", "SLURM_JOBID"]);
    expect(task.env).toMatchObject({
      A: "1",
      USER: "jo",
      LOGNAME: "jo",
      HOME: "/home/jo",
      Z: "26",
      SLURM_PROCID: "2",
      SLURM_JOB_ID: "7",
      SLURM_STEP_ID: "3",
      SLURMD_NODENAME: "nodex",
    });
    // Each task has its own object: a runtime changing one task's environment changes no other.
    expect(c!.record.tasks[1]!.env).not.toBe(task.env);
    expect(c!.record.tasks[1]!.env.SLURM_PROCID).toBe("1");
  });
});

describe("decideTaskEnd", () => {
  it("is the exit code, or 128+N for signal N, from the raw wait status", () => {
    const spec = { argv: ["x"], env: {}, cwd: "/" };
    expect(decideTaskEnd(spec, 3 << 8).status).toBe(3);
    expect(decideTaskEnd(spec, 9).status).toBe(137);
    expect(decideTaskEnd(spec, 15).status).toBe(143);
  });
});

describe("pipeLines", () => {
  async function copy(chunks: (string | Buffer)[], label = "") {
    const source = new PassThrough();
    const out: Buffer[] = [];
    const done = pipeLines(
      source,
      functionSink((d) => out.push(Buffer.from(d))),
      (piece, atLineStart) => Buffer.concat([Buffer.from(atLineStart ? label : ""), piece]),
    );
    for (const c of chunks) source.write(c);
    source.end();
    await done;
    return out;
  }

  it("emits whole lines only, however the input is cut", async () => {
    const out = await copy(["he", "llo\nwor", "ld\n", "tail"], "0: ");
    expect(Buffer.concat(out).toString()).toBe("0: hello\n0: world\n0: tail\n");
    for (const piece of out) expect(piece.toString().endsWith("\n")).toBe(true);
  });

  it("passes a line longer than 64 KiB on unaltered, labelled once", async () => {
    const long = "x".repeat(200_000);
    const out = await copy(
      [long.slice(0, 70_000), long.slice(70_000, 150_000), `${long.slice(150_000)}\nshort\n`],
      "3: ",
    );
    expect(Buffer.concat(out).toString()).toBe(`3: ${long}\n3: short\n`);
  });

  it("passes bytes that are not UTF-8 through unchanged, even split mid-character", async () => {
    const bytes = Buffer.from([0xff, 0xfe, 0x0a, 0xe2, 0x82]);
    const rest = Buffer.from([0xac, 0x0a]);
    const out = await copy([bytes, rest]);
    expect(Buffer.concat(out)).toEqual(Buffer.concat([bytes, rest]));
  });

  it("property: the concatenated output is the input (plus a final newline) for any cut", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 300 }),
        fc.array(fc.nat(300), { maxLength: 5 }),
        async (data, cuts) => {
          const buf = Buffer.from(data);
          const points = [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
          const chunks: Buffer[] = [];
          let prev = 0;
          for (const p of [...points, buf.length]) {
            if (p > prev) chunks.push(buf.subarray(prev, p));
            prev = Math.max(prev, p);
          }
          const out = Buffer.concat(await copy(chunks));
          const expected =
            buf.length === 0 || buf[buf.length - 1] === 0x0a ? buf : Buffer.concat([buf, Buffer.from("\n")]);
          expect(out).toEqual(expected);
        },
      ),
    );
  });
});

describe("forkRequest (the task forker's start request)", () => {
  /** The fields as forker.pl splits them: "<bytes>\n" then the payload split on NUL. */
  function decode(request: Buffer): string[] {
    const nl = request.indexOf(0x0a);
    const length = Number(request.subarray(0, nl).toString("latin1"));
    expect(request.length - nl - 1).toBe(length);
    return request
      .subarray(nl + 1)
      .toString()
      .split("\0");
  }
  const text = fc.string({ unit: "grapheme", maxLength: 12 }).filter((s) => !s.includes("\0"));

  it("property: decodes to id, fds, passed fds, user, cgroup, cwd, argc, argv, K=V for every defined variable, in order, as UTF-8", () => {
    fc.assert(
      fc.property(
        fc.nat(100_000),
        fc.array(text, { minLength: 1, maxLength: 4 }),
        fc.dictionary(
          text.filter((k) => k !== "" && !k.includes("=")),
          fc.option(text, { nil: undefined }),
        ),
        fc.boolean(),
        text,
        (id, argv, env, drop, cwd) => {
          const user = drop ? { uid: 1000, gid: 100 } : undefined;
          const request = forkRequest(
            id,
            [-1, 5, 0],
            { argv, env: env as Record<string, string>, cwd },
            { ...(user ? { user } : {}), cgroupProcs: "/sys/fs/cgroup/x/cgroup.procs" },
            drop ? [[7, 11]] : [],
          );
          const vars = Object.entries(env).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`]));
          expect(decode(request)).toEqual([
            String(id),
            "-1",
            "5",
            "0",
            drop ? "7:11" : "",
            user ? "1000" : "",
            user ? "100" : "",
            "/sys/fs/cgroup/x/cgroup.procs",
            cwd,
            String(argv.length),
            ...argv,
            ...vars,
          ]);
        },
      ),
    );
  });

  it("ends with an empty last value, and refuses a NUL byte in any field with the field named", () => {
    expect(decode(forkRequest(1, [0, 1, 2], { argv: ["/bin/true"], env: { EMPTY: "" }, cwd: "/" }, {})).at(-1)).toBe(
      "EMPTY=",
    );
    const spec = { argv: ["/bin/true"], env: { A: "1" }, cwd: "/" };
    expect(() => forkRequest(1, [0, 1, 2], { ...spec, argv: ["/bin/tr\0ue"] }, {})).toThrow(
      /without null bytes: "\/bin\/tr\\u0000ue"/,
    );
    expect(() => forkRequest(1, [0, 1, 2], { ...spec, env: { "B\0": "2" } }, {})).toThrow(
      /without null bytes: "B\\u0000=2"/,
    );
    expect(() => forkRequest(1, [0, 1, 2], { ...spec, env: { B: "x\0y" } }, {})).toThrow(
      /without null bytes: "B=x\\u0000y"/,
    );
    expect(() => forkRequest(1, [0, 1, 2], { ...spec, cwd: "/t\0mp" }, {})).toThrow(/without null bytes/);
  });
});

describe("--uid / --gid ids", () => {
  it("takes ids up to 2^31-1 (what a task can be started as) and refuses larger ones with one usage line", () => {
    expect(lookupUser("2147483647")).toMatchObject({ uid: 2147483647, gid: 2147483647 });
    expect(lookupGroup("2147483647")).toBe(2147483647);
    for (const id of ["2147483648", "4294967295", "4294967296", "9".repeat(400)]) {
      expect(() => lookupUser(id)).toThrow(
        expect.objectContaining({
          code: "ERR_USAGE",
          message: expect.stringMatching(/^--uid: "\d+(\.\.\.)?" is not an id from 0 to 2147483647$/),
        }),
      );
      expect(() => lookupGroup(id)).toThrow(
        expect.objectContaining({
          code: "ERR_USAGE",
          message: expect.stringMatching(/^--gid: "\d+(\.\.\.)?" is not an id from 0 to 2147483647$/),
        }),
      );
    }
  });

  it("jobUser: the host's own user without --uid/--gid; root may name another, anyone else only themselves", () => {
    expect(jobUser(undefined, undefined)).toEqual(currentUser());
    const me = currentUser();
    if (me.uid === 0) {
      expect(jobUser("2147483647", "5")).toMatchObject({ uid: 2147483647, gid: 5 });
    } else {
      expect(() => jobUser("0", undefined)).toThrow(
        expect.objectContaining({
          code: "ERR_USAGE",
          message: "--uid/--gid: only root may run tasks as another user or group",
        }),
      );
      expect(jobUser(String(me.uid), String(me.gid))).toMatchObject({ uid: me.uid, gid: me.gid });
    }
  });
});
