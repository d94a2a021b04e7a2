import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join, normalize, relative } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { jobrt, repoRoot, runProgram } from "../helpers/jobrt.js";

const cliDir = join(repoRoot, "packages/cli");
const manifest = (dir: string) =>
  JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string; private?: boolean; man?: string[] };

/** A man page as a reader sees it: groff's man macros, plain ASCII, no warning allowed. */
async function render(file: string): Promise<string> {
  const result = await runProgram(["groff", "-man", "-Tascii", "-P-cbou", "-ww", "-z", file]);
  expect(result.stderr, `groff warnings for ${file}`).toBe("");
  const text = await runProgram(["groff", "-man", "-Tascii", "-P-cbou", file]);
  expect(text.code).toBe(0);
  // man-db's own reader takes it too (what `man jobrt` runs once npm has installed the page).
  const viaMan = await runProgram(["man", "-l", file], {
    env: { ...process.env, MANPAGER: "cat", PAGER: "cat", MANWIDTH: "100" },
  });
  expect(viaMan.code, viaMan.stderr).toBe(0);
  expect(viaMan.stdout).toContain(file.endsWith(".1") ? "NAME" : "JOBRT.CONF");
  return text.stdout;
}

/** The long and short options a help text names on its usage and option lines. */
function helpOptions(help: string): string[] {
  const lines = help.split("\n").filter((line) => /^(Usage:|\s+(-|jobrt ))/.test(line));
  return [
    ...new Set(
      lines.flatMap((line) =>
        [...line.matchAll(/(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z]\b)/g)].map((m) => m[1] as string),
      ),
    ),
  ];
}

/** The keys of a schema object literal (`const NAME = { ... } satisfies ConfSchema`) in a source file (what that file's parser accepts). */
function schemaKeys(file: string, name: string): string[] {
  const text = readFileSync(join(repoRoot, file), "utf8");
  const body = text.slice(text.indexOf(`const ${name} = {`)).split("\n} satisfies ConfSchema;")[0] ?? "";
  return [...body.matchAll(/^ {2}([A-Z][A-Za-z]+):/gm)].map((m) => m[1] as string);
}

describe("the man pages of @jobrt/cli", () => {
  let page1 = "";
  let page5 = "";
  beforeAll(async () => {
    expect(manifest(cliDir).man).toEqual(["./dist/man/jobrt.1", "./dist/man/jobrt.conf.5"]);
    page1 = await render(join(cliDir, "dist/man/jobrt.1"));
    page5 = await render(join(cliDir, "dist/man/jobrt.conf.5"));
  });

  it("jobrt.1 has every command of jobrt --help, and every option each command's --help names", async () => {
    const main = (await jobrt(["--help"])).stdout;
    const commands = [...(main.split(/^Commands:\n/m)[1]?.split("\n\n")[0] ?? "").matchAll(/^ {2}([a-z]+) /gm)].map(
      (m) => m[1] as string,
    );
    expect(commands).toEqual(
      expect.arrayContaining(["run", "exec", "gc", "check", "runtimes", "images", "ps", "help", "completion"]),
    );
    for (const option of helpOptions(main)) expect(page1).toMatch(new RegExp(`(?<![\\w-])${option}\\b`));
    for (const command of commands) {
      const help = (await jobrt([command, "--help"])).stdout;
      expect(page1, command).toContain(`Usage: jobrt ${command}`);
      for (const option of helpOptions(help))
        expect(page1, `${command} ${option}`).toMatch(new RegExp(`(?<![\\w-])${option}\\b`));
      // The whole text, line for line, as --help prints it (the page is made from it).
      for (const line of help.split("\n").filter((l) => l.trim() !== "")) expect(page1, command).toContain(line.trim());
    }
  });

  it("jobrt.conf.5 has every key of jobrt.conf, oci.conf and images.conf that jobrt reads", () => {
    const keys = [
      ...schemaKeys("packages/launcher/src/siteconf.ts", "SCHEMA"),
      ...schemaKeys("packages/runtime-oci/src/conf.ts", "OCI_CONF_SCHEMA"),
      ...schemaKeys("packages/images/src/settings.ts", "IMAGES_CONF_SCHEMA"),
    ];
    expect(keys).toEqual(
      expect.arrayContaining(["NodeLog", "NodeLogFacility", "SpoolDir", "RunTimeRun", "InsecureRegistries"]),
    );
    for (const key of keys) expect(page5, key).toMatch(new RegExp(`^ {7}.*\\b${key}\\b`, "m"));
    for (const section of ["JOBRT.CONF", "OCI.CONF", "IMAGES.CONF"])
      expect(page5).toMatch(new RegExp(`^${section}$`, "m"));
  });

  it("npm packs the pages (what npm i -g installs from the man field)", async () => {
    const packed = await runProgram(["npm", "pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: cliDir });
    expect(packed.code, packed.stderr).toBe(0);
    const files = (JSON.parse(packed.stdout) as { files: { path: string }[] }[])[0]?.files.map((f) => f.path) ?? [];
    expect(files).toEqual(
      expect.arrayContaining([
        "dist/man/jobrt.1",
        "dist/man/jobrt.conf.5",
        "dist/completion.bash",
        "dist/completion.zsh",
        "dist/completionruntimes.mjs",
      ]),
    );
  });
});

describe("what a package ships points only at what it ships", () => {
  const dirs = ["packages", "examples"].flatMap((group) =>
    readdirSync(join(repoRoot, group)).map((entry) => join(repoRoot, group, entry)),
  );
  const published = dirs.filter((dir) => existsSync(join(dir, "package.json")) && !manifest(dir).private);

  it("no README links or names a file outside its package (a URL instead)", () => {
    expect(published.length).toBeGreaterThan(6);
    const bad: string[] = [];
    for (const dir of published) {
      const readme = readFileSync(join(dir, "README.md"), "utf8");
      const targets = [...readme.matchAll(/\]\(([^)\s]+)\)/g)]
        .map((m) => m[1] as string)
        .filter((t) => !/^(https?:|#|mailto:)/.test(t));
      for (const target of targets) {
        const path = relative(dir, normalize(join(dir, target.split("#")[0] as string)));
        if (path.startsWith("..") || !existsSync(join(dir, path)))
          bad.push(`${relative(repoRoot, dir)}/README.md: ${target}`);
      }
      for (const m of readme.matchAll(/`((docs|api)\/[^`]+)`/g))
        bad.push(`${relative(repoRoot, dir)}/README.md: ${m[1]}`);
    }
    expect(bad).toEqual([]);
  });

  it("no help text names a repository document (docs/*.md): the man pages carry the reference", async () => {
    const main = (await jobrt(["--help"])).stdout;
    const commands = [...(main.split(/^Commands:\n/m)[1]?.split("\n\n")[0] ?? "").matchAll(/^ {2}([a-z]+) /gm)].map(
      (m) => m[1] as string,
    );
    for (const text of [main, ...(await Promise.all(commands.map(async (c) => (await jobrt([c, "--help"])).stdout)))]) {
      expect(text).not.toMatch(/docs\/|\.md\b/);
    }
  });
});
