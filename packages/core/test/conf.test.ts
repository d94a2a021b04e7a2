import { writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  type ConfSchema,
  type ConfValues,
  type FieldSpec,
  type ParsedConf,
  loadConfFile,
  parseConf,
  parseSlurmBool,
} from "../src/index.js";
import { tempDir } from "../../../tests/helpers/tmp.js";

const schema: ConfSchema = {
  RunTimeRun: { type: "string" },
  RunTimeQuery: { type: "string" },
  DisableCleanup: { type: "bool" },
  KillWait: { type: "int", min: 0, max: 100 },
  DisableHooks: { type: "list" },
  SrunArgs: { type: "array" },
  CreateEnvFile: { type: { enum: { null: "null", newline: "newline", disabled: "disabled" } } },
  Name: { type: "string", check: (v: string) => (v.startsWith("x") ? "must not start with x" : undefined) },
};

const parse = (text: string, s: ConfSchema = schema) => parseConf(text, { file: "/etc/jobrt/test.conf", schema: s });

describe("parseConf: Slurm syntax", () => {
  it("reads Key=Value lines with case-insensitive keys and optional spaces", () => {
    const c = parse("runtimerun=a\n  RUNTIMEQUERY =  b  \nDisableCleanup = yes\n");
    expect(c.values).toEqual({ RunTimeRun: "a", RunTimeQuery: "b", DisableCleanup: true });
    expect(c.where.RunTimeQuery).toEqual({ file: "/etc/jobrt/test.conf", line: 2, column: 19 });
  });

  it("takes double-quoted values with spaces", () => {
    expect(parse('RunTimeRun="runc run %n.%u -b %b"').values.RunTimeRun).toBe("runc run %n.%u -b %b");
  });

  it("ends the line at # even inside quotes, as Slurm does, unless escaped", () => {
    expect(parse("RunTimeRun=abc # comment").values.RunTimeRun).toBe("abc");
    expect(parse("RunTimeRun=a\\#b").values.RunTimeRun).toBe("a#b");
    expect(() => parse('RunTimeRun="a # b"')).toThrow(/test\.conf:1:12: RunTimeRun: unterminated double quote/);
    expect(parse('# only a comment\n\n   \nRunTimeRun="a \\# b"').values.RunTimeRun).toBe("a # b");
  });

  it("removes backslashes and keeps the next character; \\\\ is one backslash", () => {
    expect(parse('RunTimeRun="a\\\\b"').values.RunTimeRun).toBe("a\\b");
    // Escapes are removed before the line is split, so an escaped space still ends a bare value.
    expect(() => parse("RunTimeRun=a\\ b")).toThrow(/unexpected text after the value: "b"/);
  });

  it("joins lines ending in an odd number of backslashes", () => {
    const c = parse('RunTimeRun="runc \\\nrun x"\nRunTimeQuery=q');
    expect(c.values).toMatchObject({ RunTimeRun: "runc run x", RunTimeQuery: "q" });
    expect(c.where.RunTimeQuery?.line).toBe(3);
  });

  it("accepts the operators += -= *= /= like Slurm (ignored for strings)", () => {
    expect(parse("RunTimeRun+=x").values.RunTimeRun).toBe("x");
  });

  it("spells booleans as Slurm does", () => {
    for (const t of ["yes", "YES", "up", "true", "1"]) expect(parseSlurmBool(t)).toBe(true);
    for (const f of ["no", "Down", "false", "0"]) expect(parseSlurmBool(f)).toBe(false);
    expect(() => parse("DisableCleanup=maybe")).toThrow(/test\.conf:1:16: DisableCleanup: "maybe" is not a boolean/);
  });

  it("lets the last of a repeated scalar win, with a warning; arrays append", () => {
    const c = parse("RunTimeRun=a\nRunTimeRun=b\nSrunArgs=--x\nSrunArgs=--y");
    expect(c.values.RunTimeRun).toBe("b");
    expect(c.values.SrunArgs).toEqual(["--x", "--y"]);
    expect(c.warnings).toEqual([
      "/etc/jobrt/test.conf:2: RunTimeRun specified more than once (first at line 1); the last value wins",
    ]);
  });

  it("parses lists, ints and enums, case-insensitively for enums", () => {
    const c = parse('DisableHooks="prestart, poststop"\nKillWait=30\nCreateEnvFile=NewLine');
    expect(c.values).toMatchObject({ DisableHooks: ["prestart", "poststop"], KillWait: 30, CreateEnvFile: "newline" });
  });

  it.each([
    ["Bogus=1", /test\.conf:1:1: Bogus: unknown key/],
    ["RunTimeRun=a b", /test\.conf:1:12: RunTimeRun: unexpected text after the value/],
    ["RunTimeRun=a RunTimeQuery=b", /unexpected text after the value/],
    ["just words", /test\.conf:1:1: expected Key=Value/],
    ["KillWait=abc", /KillWait: "abc" is not an integer/],
    ["KillWait=101", /KillWait: 101 is above the maximum 100/],
    ["CreateEnvFile=sometimes", /CreateEnvFile: "sometimes" is not one of null, newline, disabled/],
    ["Name=xyz", /Name: must not start with x/],
    ['\n\nRunTimeRun="open', /test\.conf:3:12: RunTimeRun: unterminated/],
  ])("%s is an error with file:line:column and the key", (text, message) => {
    expect(() => parse(text)).toThrow(message);
    try {
      parse(text);
    } catch (error) {
      expect(error).toMatchObject({ code: "ERR_CONF", details: { file: "/etc/jobrt/test.conf" } });
    }
  });

  it("reports a missing required key", () => {
    expect(() => parse("", { A: { type: "string", required: true } })).toThrow(
      "/etc/jobrt/test.conf: missing required key A",
    );
  });

  it("follows Include relative to the including file and names the included file in errors", () => {
    const dir = tempDir("jobrt-conf-");
    writeFileSync(join(dir, "extra.conf"), "RunTimeQuery=q\nBogus=1\n");
    writeFileSync(join(dir, "main.conf"), "RunTimeRun=r\nInclude extra.conf\n");
    expect(() => loadConfFile(join(dir, "main.conf"), schema)).toThrow(
      `${join(dir, "extra.conf")}:2:1: Bogus: unknown key`,
    );
    writeFileSync(join(dir, "extra.conf"), "RunTimeQuery=q\n");
    expect(loadConfFile(join(dir, "main.conf"), schema)?.values).toEqual({ RunTimeRun: "r", RunTimeQuery: "q" });
  });

  it("returns undefined for a file that does not exist", () => {
    expect(loadConfFile("/nonexistent/jobrt.conf", schema)).toBeUndefined();
  });

  it("accepts CRLF line ends", () => {
    expect(parse("RunTimeRun=a\r\nRunTimeQuery=b\r\n").values).toEqual({ RunTimeRun: "a", RunTimeQuery: "b" });
  });
});

describe("parseConf: properties", () => {
  const safeValue = fc.stringMatching(/^[^\s"#\\]{1,40}$/);
  const spacedValue = fc.stringMatching(/^[^"#\\\n]{0,40}$/);

  it("an unquoted value without specials round-trips", () => {
    fc.assert(
      fc.property(safeValue, (v) => {
        expect(parse(`RunTimeRun=${v}`).values.RunTimeRun).toBe(v);
      }),
    );
  });

  it("a quoted value round-trips, spaces included", () => {
    fc.assert(
      fc.property(spacedValue, (v) => {
        expect(parse(`RunTimeRun="${v}"`).values.RunTimeRun).toBe(v);
      }),
    );
  });

  it('escaping \\ # and " round-trips any printable value without spaces or a leading quote', () => {
    fc.assert(
      // A leading " always opens a quote (escapes are removed first), so only later ones are representable.
      fc.property(fc.stringMatching(/^[\x21\x23-\x7e][\x21-\x7e]{0,39}$/), (v) => {
        const escaped = v.replace(/[\\#"]/g, (c) => `\\${c}`);
        expect(parse(`RunTimeRun=${escaped}`).values.RunTimeRun).toBe(v);
      }),
    );
  });

  it("quoting, with \\ and # escaped, round-trips any printable value without a double quote", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[\x20-\x21\x23-\x7e]{0,40}$/), (v) => {
        const escaped = v.replace(/[\\#]/g, (c) => `\\${c}`);
        expect(parse(`RunTimeRun="${escaped}"`).values.RunTimeRun).toBe(v);
      }),
    );
  });

  it("any text either parses or fails with ERR_CONF naming the file and a line that exists", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        try {
          parse(text);
        } catch (error) {
          expect(error).toMatchObject({ code: "ERR_CONF" });
          const line = (error as { details: { line?: number } }).details.line;
          if (line !== undefined) expect(line).toBeLessThanOrEqual(text.split("\n").length);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it("key case never matters", () => {
    fc.assert(
      fc.property(fc.array(fc.boolean(), { minLength: 10, maxLength: 10 }), safeValue, (upper, v) => {
        const key = [..."RunTimeRun"].map((c, i) => (upper[i] ? c.toUpperCase() : c.toLowerCase())).join("");
        expect(parse(`${key}=${v}`).values.RunTimeRun).toBe(v);
      }),
    );
  });
});

describe("parseConf: values typed from the schema", () => {
  const MODES: Record<string, "null" | "newline" | "disabled"> = {
    null: "null",
    yes: "null",
    newline: "newline",
    no: "disabled",
  };
  const typedSchema = {
    Path: { type: "string", check: (v: string) => (v.startsWith("/") ? undefined : "must be absolute") },
    Wait: { type: "int", min: 0 },
    Cleanup: { type: "bool" },
    Hooks: { type: "list", check: (v: string[]) => (v.length > 3 ? "at most 3" : undefined) },
    Args: { type: "array", check: (v: string) => (v === "" ? "empty" : undefined) },
    Mode: { type: { enum: MODES } },
    Name: { type: "string", required: true },
  } satisfies ConfSchema;
  const text = 'Name=n\nPath=/p\nWait=7\nCleanup=yes\nHooks="a, b"\nArgs=x\nArgs=y\nMode=YES';

  it("gives each key the type of its kind, optional unless required", () => {
    const { values } = parseConf(text, { file: "t.conf", schema: typedSchema });
    expectTypeOf(values).toEqualTypeOf<ConfValues<typeof typedSchema>>();
    expectTypeOf(values.Name).toEqualTypeOf<string>();
    expectTypeOf(values.Path).toEqualTypeOf<string | undefined>();
    expectTypeOf(values.Wait).toEqualTypeOf<number | undefined>();
    expectTypeOf(values.Cleanup).toEqualTypeOf<boolean | undefined>();
    expectTypeOf(values.Hooks).toEqualTypeOf<string[] | undefined>();
    expectTypeOf(values.Args).toEqualTypeOf<string[] | undefined>();
    expectTypeOf(values.Mode).toEqualTypeOf<"null" | "newline" | "disabled" | undefined>();
    // @ts-expect-error: a key the schema does not declare is never set.
    expect(values.Pth).toBeUndefined();
    // What the types say is what parseConf gives.
    expect(values).toEqual({
      Name: "n",
      Path: "/p",
      Wait: 7,
      Cleanup: true,
      Hooks: ["a", "b"],
      Args: ["x", "y"],
      Mode: "null",
    });
    expect(parseConf("Name=n", { file: "t.conf", schema: typedSchema }).values).toEqual({ Name: "n" });
  });

  it("types a check's value by its kind (an array key's check sees one line's value)", () => {
    expectTypeOf<Parameters<NonNullable<FieldSpec<"list">["check"]>>[0]>().toEqualTypeOf<string[]>();
    expectTypeOf<Parameters<NonNullable<FieldSpec<"array">["check"]>>[0]>().toEqualTypeOf<string>();
    expectTypeOf<Parameters<NonNullable<FieldSpec<"int">["check"]>>[0]>().toEqualTypeOf<number>();
    expectTypeOf<Parameters<NonNullable<FieldSpec<"bool">["check"]>>[0]>().toEqualTypeOf<boolean>();
    expect(() => parseConf("Name=n\nHooks=a,b,c,d", { file: "t.conf", schema: typedSchema })).toThrow(
      "t.conf:2:7: Hooks: at most 3",
    );
    expect(() => parseConf("Name=n\nArgs=x\nArgs=", { file: "t.conf", schema: typedSchema })).toThrow(
      "t.conf:3:6: Args: empty",
    );
  });

  it("keeps a schema typed only as ConfSchema, and a check cast as API 2.0 asked, as they were", () => {
    const old: ConfSchema = {
      Hooks: {
        type: "list",
        check: ((v: string[]) => (v.length > 1 ? "one" : undefined)) as (v: never) => string | undefined,
      },
    };
    const parsed = parseConf("Hooks=a", { file: "t.conf", schema: old });
    expectTypeOf(parsed).toEqualTypeOf<ParsedConf>();
    expectTypeOf(parsed.values).toEqualTypeOf<Record<string, string | boolean | number | string[]>>();
    expectTypeOf(loadConfFile("/nonexistent/t.conf", typedSchema)).toEqualTypeOf<
      ParsedConf<typeof typedSchema> | undefined
    >();
    expect(parsed.values).toEqual({ Hooks: ["a"] });
    expect(() => parseConf("Hooks=a,b", { file: "t.conf", schema: old })).toThrow("Hooks: one");
  });
});
