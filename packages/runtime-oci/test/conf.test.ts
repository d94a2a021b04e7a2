import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { JobrtError, isJobrtError } from "@jobrt/core";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { OCI_CONF_SCHEMA, embeddedDefaultConf, loadOciConf, parseOciConf } from "../src/conf.js";
import plugin from "../src/index.js";
import { runStep, tempDir } from "./host.js";

const fixtures = new URL("./fixtures/", import.meta.url).pathname;
const badDir = join(fixtures, "bad-oci-conf");
const sampleDir = join(fixtures, "slurm-samples");

function expectation(text: string): { line: number; fragment: string } {
  const m = /^# expect (\d+): (.*)$/m.exec(text);
  return m ? { line: Number(m[1]), fragment: m[2] as string } : { line: 0, fragment: "missing required options" };
}

describe("the bad-oci.conf corpus: each file fails at load with its line number", () => {
  const files = readdirSync(badDir).filter((f) => f.endsWith(".conf"));
  test("has one file per rule", () => {
    expect(files.length).toBeGreaterThanOrEqual(20);
  });
  for (const f of files) {
    test(f, () => {
      const file = join(badDir, f);
      const text = readFileSync(file, "utf8");
      const { line, fragment } = expectation(text);
      let error: unknown;
      try {
        parseOciConf(text, file);
      } catch (e) {
        error = e;
      }
      expect(isJobrtError(error, "ERR_CONF"), String(error)).toBe(true);
      const message = (error as JobrtError).message;
      expect(message).toContain(fragment);
      if (line > 0) {
        expect(message.startsWith(`${file}:${line}:`), message).toBe(true);
        expect((error as JobrtError).details.line).toBe(line);
      } else {
        expect(message.startsWith(`${file}:`)).toBe(true);
      }
      expect(message).not.toContain("\n");
    });
  }
});

describe("Slurm's documented oci.conf examples (runtime-oci.md W15) parse unchanged", () => {
  const expected: Record<string, "run" | "create-start"> = {
    "runc-create-start.conf": "create-start",
    "runc-run.conf": "run",
    "crun-create-start.conf": "create-start",
    "crun-run.conf": "run",
    "nvidia-create-start.conf": "create-start",
    "nvidia-run.conf": "run",
    "singularity-native.conf": "run",
    "singularity-oci.conf": "run",
    "hpcng-singularity-3.8.conf": "create-start",
    "charliecloud.conf": "run",
    "enroot.conf": "run",
    "multiple-runtimes.conf": "run",
    "slurm-22.05-working.conf": "run",
  };
  for (const f of readdirSync(sampleDir)) {
    test(f, () => {
      const conf = parseOciConf(readFileSync(join(sampleDir, f), "utf8"), f);
      expect(conf.mode).toBe(expected[f]);
      expect(conf.warnings).toEqual([]);
    });
  }
  test("values come through as written", () => {
    const conf = parseOciConf(readFileSync(join(sampleDir, "charliecloud.conf"), "utf8"), "charliecloud.conf");
    expect(conf.ignoreFileConfigJson).toBe(true);
    expect(conf.createEnvFile).toBe("newline");
    expect(conf.envExclude?.test("SLURM_CONF=/etc/slurm.conf")).toBe(true);
    expect(conf.envExclude?.test("SLURM_CONFX=1")).toBe(false);
    expect(conf.runTimeEnvExclude?.test("SLURM_CONF_SERVER=a")).toBe(true);
    expect(conf.commands.RunTimeRun).toContain("--set-env=%e --no-passwd %r -- %@");
    expect(conf.commands.RunTimeKill).toBe("kill -s SIGTERM %p");
  });
});

describe("oci.conf semantics", () => {
  const run = 'RunTimeRun="r %b"\nRunTimeKill=k\nRunTimeDelete=d\n';
  test("keys are case-insensitive and the last repeated value wins, with a warning", () => {
    const conf = parseOciConf(`runtimerun="first"\n${run}disablecleanup=YES\n`, "x.conf");
    expect(conf.commands.RunTimeRun).toBe("r %b");
    expect(conf.disableCleanup).toBe(true);
    expect(conf.warnings.join()).toContain("specified more than once");
  });
  test("CreateEnvFile spellings", () => {
    const mode = (v: string) => parseOciConf(`${run}CreateEnvFile=${v}\n`, "x").createEnvFile;
    for (const v of ["null", "true", "Y", "Yes", "1", "NULL"]) expect(mode(v)).toBe("null");
    for (const v of ["newline", "NewLine"]) expect(mode(v)).toBe("newline");
    for (const v of ["disabled", "false", "N", "No", "0"]) expect(mode(v)).toBe("disabled");
    expect(parseOciConf(run, "x").createEnvFile).toBe("disabled");
  });
  test("run mode does not need RunTimeQuery; create/start needs all five", () => {
    expect(parseOciConf(run, "x").mode).toBe("run");
    const cs = "RunTimeCreate=c\nRunTimeStart=s\nRunTimeQuery=q\nRunTimeKill=k\nRunTimeDelete=d\n";
    expect(parseOciConf(cs, "x").mode).toBe("create-start");
  });
  test("IgnoreFileConfigJson needs only RunTimeRun", () => {
    const conf = parseOciConf('IgnoreFileConfigJson=true\nRunTimeRun="x %@"\n', "x");
    expect(conf.mode).toBe("run");
    expect(conf.commands.RunTimeKill).toBeUndefined();
  });
  test("DisableHooks is a list of known hook kinds", () => {
    expect(parseOciConf(`${run}DisableHooks=prestart,createRuntime,poststop\n`, "x").disableHooks).toEqual([
      "prestart",
      "createRuntime",
      "poststop",
    ]);
  });
  test("scrun-only keys are accepted and ignored, each with one warning naming file:line", () => {
    const conf = parseOciConf(
      `${run}SrunPath=/usr/bin/srun\nSrunArgs=--a\nSrunArgs=--b\nStdIODebug=debug\nSyslogDebug=info\nFileDebug=debug5\nDebugFlags=Steps\n`,
      "/etc/jobrt/oci.conf",
    );
    expect(conf.mode).toBe("run");
    const n = run.split("\n").length - 1;
    const tail = "accepted for Slurm compatibility, ignored by jobrt (only Slurm's scrun reads it)";
    expect(conf.warnings).toEqual([
      `/etc/jobrt/oci.conf:${n + 1}: SrunPath ${tail}`,
      `/etc/jobrt/oci.conf:${n + 3}: SrunArgs ${tail}`,
      `/etc/jobrt/oci.conf:${n + 4}: StdIODebug ${tail}`,
      `/etc/jobrt/oci.conf:${n + 5}: SyslogDebug ${tail}`,
      `/etc/jobrt/oci.conf:${n + 6}: FileDebug ${tail}`,
      `/etc/jobrt/oci.conf:${n + 7}: DebugFlags ${tail}`,
    ]);
    expect(parseOciConf(run, "x").warnings).toEqual([]);
  });
  test("the schema knows Slurm's 20 keys and jobrt's MpiNamespaces", () => {
    expect(Object.keys(OCI_CONF_SCHEMA)).toHaveLength(21);
    expect(OCI_CONF_SCHEMA).toHaveProperty("MpiNamespaces");
  });
  test("POSIX bracket classes in regexes", () => {
    const conf = parseOciConf(`${run}EnvExclude="^[[:upper:]_]+_SECRET="\n`, "x");
    expect(conf.envExclude?.test("MY_SECRET=1")).toBe(true);
    expect(conf.envExclude?.test("my_SECRET=1")).toBe(false);
  });
  test("loadOciConf: a missing file is undefined, a present one is parsed", () => {
    const dir = tempDir();
    expect(loadOciConf(dir)).toBeUndefined();
    writeFileSync(join(dir, "oci.conf"), run);
    expect(loadOciConf(dir)?.file).toBe(join(dir, "oci.conf"));
  });
  test("the embedded default is a valid run-mode configuration", () => {
    const conf = embeddedDefaultConf("/usr/sbin/runc", false);
    const text = Object.entries(conf.commands)
      .map(([k, v]) => `${k}="${v}"`)
      .join("\n");
    expect(parseOciConf(text, "embedded").mode).toBe("run");
    expect(embeddedDefaultConf("/usr/sbin/runc", true).commands.RunTimeRun).toContain("--rootless=true --root %m/runc");
  });
});

describe("properties", () => {
  const keyCase = (k: string) => fc.constantFrom(k, k.toLowerCase(), k.toUpperCase());
  const value = fc.stringMatching(/^[a-z0-9 ./%-]{1,20}$/).map((s) => s.replace(/%/g, "%%"));
  test("any spelling, spacing and quoting of a valid run-mode file gives the same commands", () => {
    fc.assert(
      fc.property(
        fc.tuple(keyCase("RunTimeRun"), keyCase("RunTimeKill"), keyCase("RunTimeDelete")),
        fc.tuple(value, value, value),
        fc.constantFrom("=", " = ", "=\t", "  =  "),
        fc.boolean(),
        ([kr, kk, kd], [vr, vk, vd], eq, comments) => {
          const line = (k: string, v: string) => `${k}${eq}"${v}"${comments ? "  # note" : ""}`;
          const text = [line(kd, vd), comments ? "# heading" : "", line(kr, vr), line(kk, vk)].join("\n");
          const conf = parseOciConf(text, "p.conf");
          expect(conf.commands).toEqual({ RunTimeRun: vr, RunTimeKill: vk, RunTimeDelete: vd });
        },
      ),
    );
  });
  test("arbitrary text either parses or fails with ERR_CONF naming the file, never anything else", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 200 }),
        fc.array(fc.constantFrom(...Object.keys(OCI_CONF_SCHEMA), "Include", "x"), { maxLength: 5 }),
        (junk, keys) => {
          const text = keys.map((k) => `${k}=${junk}`).join("\n") + junk;
          try {
            parseOciConf(text, "junk.conf");
          } catch (error) {
            expect(error).toBeInstanceOf(JobrtError);
            expect((error as JobrtError).code).toBe("ERR_CONF");
            expect((error as JobrtError).message.startsWith("junk.conf")).toBe(true);
          }
        },
      ),
    );
  });
  test("a % followed by anything outside the table is rejected in every pattern key", () => {
    const keys = ["RunTimeRun", "RunTimeKill", "RunTimeDelete", "RunTimeQuery", "ContainerPath", "MountSpoolDir"];
    fc.assert(
      fc.property(
        fc.constantFrom(...keys),
        fc.string({ minLength: 1, maxLength: 1 }).filter((c) => !'%@bejmnprstuIUZ"#\\'.includes(c) && c.trim() !== ""),
        (key, c) => {
          const base: Record<string, string> = { RunTimeRun: "r", RunTimeKill: "k", RunTimeDelete: "d" };
          base[key] = `a%${c}b`;
          const text = Object.entries(base)
            .map(([k, v]) => `${k}="${v}"`)
            .join("\n");
          expect(() => parseOciConf(text, "p.conf")).toThrow(/unknown replacement character/);
        },
      ),
    );
  });
});

test("a bad oci.conf fails the step in setup, before any task starts", async () => {
  const confDir = tempDir();
  writeFileSync(join(confDir, "oci.conf"), readFileSync(join(badDir, "run-with-create.conf")));
  const spoolDir = tempDir();
  const marker = join(tempDir(), "started");
  const r = await runStep(plugin, { confDir, spoolDir, argv: ["touch", marker], container: { value: "/nonexistent" } });
  expect(isJobrtError(r.setupError, "ERR_CONF")).toBe(true);
  expect((r.setupError as Error).message).toContain(`${join(confDir, "oci.conf")}:3:`);
  expect(r.tasks).toEqual([]);
  expect(readdirSync(spoolDir)).toEqual([]);
});
