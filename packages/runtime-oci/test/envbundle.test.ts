import { describe, expect, test } from "vitest";
import { parseBundleConfig, parseVolume, rewriteConfig } from "../src/bundle.js";
import { compileEre } from "../src/ere.js";
import { filterEnvRecord, filterEnvStrings, formatEnvFile, mergeBundleEnv } from "../src/env.js";

describe("environment", () => {
  test("bundle env overrides job vars of the same name; entries without = become NAME=(null)", () => {
    expect(mergeBundleEnv(["PATH=/host", "A=1"], ["PATH=/c", "TERM"])).toEqual(["PATH=/c", "A=1", "TERM=(null)"]);
  });
  test("EnvExclude matches the whole NAME=value string, unanchored", () => {
    const re = compileEre("^(SLURM_CONF|SLURM_CONF_SERVER)=");
    expect(filterEnvStrings(["SLURM_CONF=/x", "SLURM_CONF_SERVER=h", "SLURM_CONFX=1", "A=SLURM_CONF="], re)).toEqual([
      "SLURM_CONFX=1",
      "A=SLURM_CONF=",
    ]);
    expect(filterEnvStrings(["A=secret", "B=ok"], compileEre("secret"))).toEqual(["B=ok"]);
    expect(filterEnvRecord({ A: "secret", B: "ok" }, compileEre("secret"))).toEqual({ B: "ok" });
  });
  test("env file: NUL-terminated, or LF-terminated dropping values with a line feed", () => {
    expect(formatEnvFile(["A=1", "B=x\ny"], "null")).toEqual({ content: "A=1\0B=x\ny\0", dropped: [] });
    expect(formatEnvFile(["A=1", "B=x\ny", "C="], "newline")).toEqual({ content: "A=1\nC=\n", dropped: ["B"] });
  });
});

describe("config.json", () => {
  const text = JSON.stringify({
    ociVersion: "1.0.2",
    process: { terminal: true, args: ["sh"], env: ["PATH=/bin", "TERM=xterm"], cwd: "/" },
    root: { path: "rootfs", readonly: true },
    mounts: [{ destination: "/proc", type: "proc", source: "proc" }],
    hooks: {
      prestart: [{ path: "/bin/true" }],
      poststop: [{ path: "/bin/true" }],
      createRuntime: [{ path: "/bin/true" }],
    },
  });
  test("rootfs is taken relative to the bundle", () => {
    const b = parseBundleConfig(text, "/b/config.json", "/b");
    expect(b.rootfs).toBe("/b/rootfs");
    expect(b.env).toEqual(["PATH=/bin", "TERM=xterm"]);
  });
  test("missing root.path and non-JSON are request errors naming the file", () => {
    expect(() => parseBundleConfig("{}", "/b/config.json", "/b")).toThrow(/\/b\/config.json: root.path is missing/);
    expect(() => parseBundleConfig("{", "/b/config.json", "/b")).toThrow(/\/b\/config.json: not valid JSON/);
  });
  test("the per-task config.json rewrite (runtime-oci.md, Lifecycle): terminal, root.path, mounts with the spool dir last, hooks removed, env and args replaced", () => {
    const b = parseBundleConfig(text, "/b/config.json", "/b");
    const out = rewriteConfig(b.config, {
      terminal: false,
      rootfs: b.rootfs,
      spoolMount: { source: "/spool/oci-job1-0", destination: "/spool/oci-job1-0" },
      extraMounts: [parseVolume("/data:/data:ro")],
      disableHooks: ["prestart", "createRuntime"],
      env: ["A=1"],
      args: ["echo", "hi"],
      cwd: "/work",
    });
    expect(out.process).toMatchObject({ terminal: false, args: ["echo", "hi"], env: ["A=1"], cwd: "/work" });
    expect(out.root).toEqual({ path: "/b/rootfs", readonly: true });
    expect(out.mounts).toEqual([
      { destination: "/proc", type: "proc", source: "proc" },
      { destination: "/data", type: "none", source: "/data", options: ["rbind", "ro"] },
      { destination: "/spool/oci-job1-0", type: "none", source: "/spool/oci-job1-0", options: ["bind"] },
    ]);
    expect(Object.keys(out.hooks as object)).toEqual(["poststop"]);
    // the bundle's own config is untouched
    expect((b.config.process as { args: string[] }).args).toEqual(["sh"]);
  });
  test("volumes must be absolute SRC:DST[:ro|rw]", () => {
    expect(() => parseVolume("data:/data")).toThrow(/expected/);
    expect(() => parseVolume("/a:/b:rx")).toThrow(/ro or rw/);
    expect(parseVolume("/a:/b")).toEqual({ destination: "/b", type: "none", source: "/a", options: ["rbind"] });
  });
});

describe("spool naming (runtime-oci.md, Lifecycle)", () => {
  test("step dirs and %s for normal, batch, interactive and extern steps", async () => {
    const { printedStepId, stepDirName } = await import("../src/stepplace.js");
    expect(stepDirName({ kind: "normal", stepId: 7, jobId: 42 })).toBe("oci-job42-7");
    expect(stepDirName({ kind: "batch", stepId: 0, jobId: 42 })).toBe("oci-job42-batch");
    expect(stepDirName({ kind: "interactive", stepId: 0, jobId: 42 })).toBe("oci-job42-interactive");
    expect(stepDirName({ kind: "extern", stepId: 0, jobId: 42 })).toBe("oci-job42-extern");
    expect([
      printedStepId({ kind: "batch", stepId: 0 }),
      printedStepId({ kind: "interactive", stepId: 0 }),
      printedStepId({ kind: "extern", stepId: 0 }),
    ]).toEqual([4294967291, 4294967290, 4294967292]);
    expect(printedStepId({ kind: "normal", stepId: 3 })).toBe(3);
  });
});
