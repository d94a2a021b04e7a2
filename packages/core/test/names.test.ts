import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import {
  RuntimeRegistry,
  assertRuntimePlugin,
  checkAccepted,
  emptyRequest,
  normalizeRuntimeName,
  runtimeNameOf,
} from "../src/index.js";
import { isRuntimeType, packageCandidates } from "../src/names.js";

const MALICIOUS = [
  "../x",
  "..",
  ".",
  "/abs",
  "/usr/lib/node_modules/evil",
  "./local",
  "file:///tmp/evil.js",
  "file:x",
  "https://example.invalid/x.js",
  "data:text/javascript,process.exit(1)",
  "node:fs",
  "node:child_process",
  "Oci",
  "OCI",
  "a b",
  " oci",
  "oci ",
  "oci\n",
  "@scope/../x",
  "@/x",
  "@scope/",
  "@scope",
  "@Scope/x",
  "runtime/",
  "runtime/../x",
  "runtime//x",
  "x/y",
  "@a/b/c",
  "-x",
  "_x",
  "x\u0000",
  "x%2e%2e",
  "ｏci",
  "x".repeat(300),
  "",
];

describe("normalizeRuntimeName", () => {
  it.each([
    ["oci", "oci", "runtime/oci"],
    ["runtime/oci", "oci", "runtime/oci"],
    ["none", "none", "runtime/none"],
    ["charliecloud", "charliecloud", "runtime/charliecloud"],
    ["@acme/fast", "@acme/fast", "runtime/@acme/fast"],
    ["runtime/@acme/fast", "@acme/fast", "runtime/@acme/fast"],
    ["a.b_c-1", "a.b_c-1", "runtime/a.b_c-1"],
  ])("%s → %s", (input, name, type) => {
    expect(normalizeRuntimeName(input)).toMatchObject({ name, type });
  });

  it.each(MALICIOUS.map((m) => [JSON.stringify(m).slice(0, 40), m]))(
    "rejects %s without importing anything",
    async (_, bad) => {
      expect(() => normalizeRuntimeName(bad)).toThrow(expect.objectContaining({ code: "ERR_RUNTIME_NAME" }));
      const resolve = vi.fn(async () => {
        throw new Error("resolver must not be called");
      });
      const registry = new RuntimeRegistry({ resolve });
      if (bad === "") return; // "" means the default runtime, which is not a name check
      await expect(registry.load(bad)).rejects.toMatchObject({ code: "ERR_RUNTIME_NAME" });
      expect(resolve).not.toHaveBeenCalled();
    },
  );

  it("allows 100 characters (not counting runtime/) in every spelling, and refuses 101", () => {
    const base = "a".repeat(100);
    const scoped = `@${"s".repeat(48)}/${"b".repeat(50)}`;
    for (const name of [base, scoped]) {
      expect(normalizeRuntimeName(name).name).toBe(name);
      expect(normalizeRuntimeName(`runtime/${name}`).name).toBe(name);
      // The registry and the resolver normalise the type again: it must stay accepted.
      expect(normalizeRuntimeName(normalizeRuntimeName(name).type).name).toBe(name);
      for (const longer of [`${name}x`, `runtime/${name}x`]) {
        expect(() => normalizeRuntimeName(longer)).toThrow(
          expect.objectContaining({
            code: "ERR_RUNTIME_NAME",
            message: expect.stringMatching(/longer than 100 characters/),
          }),
        );
      }
    }
  });

  it("maps names to packages by one fixed rule", () => {
    expect(packageCandidates(normalizeRuntimeName("oci"))).toEqual(["@jobrt/runtime-oci", "jobrt-runtime-oci"]);
    expect(packageCandidates(normalizeRuntimeName("@acme/fast"))).toEqual(["@acme/jobrt-runtime-fast"]);
  });

  it("property: every accepted name is a fixed point and maps to valid npm package names", () => {
    const segment = fc
      .stringMatching(/^[a-z0-9][a-z0-9._-]{0,20}$/)
      .filter((s) => !s.endsWith(".") && s !== "." && s !== "..");
    fc.assert(
      fc.property(fc.option(segment, { nil: undefined }), segment, fc.boolean(), (scope, base, prefixed) => {
        const input = `${prefixed ? "runtime/" : ""}${scope ? `@${scope}/` : ""}${base}`;
        const n = normalizeRuntimeName(input);
        expect(normalizeRuntimeName(n.name)).toEqual(n);
        expect(normalizeRuntimeName(n.type)).toEqual(n);
        for (const pkg of packageCandidates(n)) expect(pkg).toMatch(/^(@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*$/);
      }),
    );
  });

  it("property: anything outside the grammar is ERR_RUNTIME_NAME, never another error", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 120 }), (s) => {
        let accepted = false;
        try {
          normalizeRuntimeName(s);
          accepted = true;
        } catch (error) {
          expect(error).toMatchObject({ code: "ERR_RUNTIME_NAME" });
        }
        if (accepted) expect(s).toMatch(/^(runtime\/)?(@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*$/);
      }),
      { numRuns: 2000 },
    );
  });
});

describe("runtimeNameOf: the name a runtime type stands for", () => {
  it.each([
    ["runtime/oci", "oci"],
    ["runtime/@acme/fast", "@acme/fast"],
    ["oci", "oci"],
    ["runtime/runtime/x", "runtime/x"],
  ])("%s is %s", (type, name) => {
    expect(runtimeNameOf(type)).toBe(name);
  });

  it("property: the inverse of normalizeRuntimeName's type, which isRuntimeType accepts", () => {
    const segment = fc
      .stringMatching(/^[a-z0-9][a-z0-9._-]{0,20}$/)
      .filter((s) => !s.endsWith(".") && s !== "." && s !== "..");
    fc.assert(
      fc.property(fc.option(segment, { nil: undefined }), segment, (scope, base) => {
        const n = normalizeRuntimeName(`${scope ? `@${scope}/` : ""}${base}`);
        expect(runtimeNameOf(n.type)).toBe(n.name);
        expect(isRuntimeType(n.type)).toBe(true);
        expect(isRuntimeType(n.name)).toBe(false);
      }),
    );
  });

  it.each(["runtime/", "runtime/Oci", "runtime/../x", "runtime/x.", `runtime/${"a".repeat(101)}`, "oci"])(
    "isRuntimeType refuses %s",
    (type) => expect(isRuntimeType(type)).toBe(false),
  );

  it("is the name the host's refusals and the plugin check use", () => {
    expect(() => checkAccepted("runtime/@acme/fast", [], { ...emptyRequest(), volumes: ["/a:/b"] })).toThrow(
      /runtime @acme\/fast does not accept --container-volume/,
    );
    const plugin = { meta: { name: "x", type: "runtime/x.", version: "1.0.0", apiVersion: 2 } };
    expect(() => assertRuntimePlugin(plugin, "runtime/x.")).toThrow(/meta.type must look like "runtime\/<name>"/);
  });
});
