import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { jobrtError, normalizeRuntimeName, packageVersion } from "@jobrt/core";

/** The template shipped in this package (template/ next to dist/). */
export const TEMPLATE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../template");

export interface CreateOptions {
  /** Directory to create; must not exist or be empty. */
  dir: string;
  /** Runtime name: `x` or `@scope/x` (what `--runtime` takes). Default: the directory's name without a jobrt-runtime- prefix. */
  name?: string;
  /**
   * Range of @jobrt/core the plugin is built for. Default: this starter's own major (every jobrt
   * package is released at one version, so the template's API is that core's).
   */
  coreRange?: string;
  testkitRange?: string;
}

export interface Created {
  dir: string;
  name: string;
  packageName: string;
  files: string[];
}

/**
 * npm strips .gitignore from tarballs, and a nested package.json with "exports" confuses tools
 * reading this package (publint flags it), so the template stores both under other names.
 */
const RENAMES: Record<string, string> = { gitignore: ".gitignore", "package.json.template": "package.json" };

function listFiles(dir: string, base = dir): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? listFiles(path, base) : [relative(base, path)];
  });
}

/** `^<major>.0.0` of the jobrt release this starter belongs to. */
function releaseRange(): string {
  return `^${packageVersion(import.meta.url).split(".")[0]}.0.0`;
}

/** Writes a new runtime package from the template. Throws ERR_USAGE naming the bad option. */
export function createRuntimeProject(options: CreateOptions): Created {
  const dir = resolve(options.dir);
  const base = dir.split("/").pop() ?? "";
  const wanted = options.name ?? base.replace(/^jobrt-runtime-/, "");
  let name: ReturnType<typeof normalizeRuntimeName>;
  try {
    name = normalizeRuntimeName(wanted);
  } catch (error) {
    throw jobrtError("ERR_USAGE", {
      problem: `--name ${JSON.stringify(wanted)}: ${(error as Error).message.replace(/^invalid runtime name "[^"]*": /, "")}`,
    });
  }
  if (wanted.startsWith("runtime/"))
    throw jobrtError("ERR_USAGE", { problem: `--name ${JSON.stringify(wanted)}: give the name without "runtime/"` });
  if (existsSync(dir) && readdirSync(dir).length > 0)
    throw jobrtError("ERR_USAGE", { problem: `${dir} exists and is not empty: choose a new directory` });
  const packageName = name.scope ? `@${name.scope}/jobrt-runtime-${name.base}` : `jobrt-runtime-${name.base}`;
  const values: Record<string, string> = {
    __PACKAGE__: packageName,
    __NAME__: name.name,
    __TYPE__: name.type,
    __CORE_RANGE__: options.coreRange ?? releaseRange(),
    __TESTKIT_RANGE__: options.testkitRange ?? releaseRange(),
  };
  const files: string[] = [];
  for (const file of listFiles(TEMPLATE_DIR)) {
    const target = join(
      dir,
      dirname(file),
      RENAMES[file.split("/").pop() as string] ?? (file.split("/").pop() as string),
    );
    const text = readFileSync(join(TEMPLATE_DIR, file), "utf8").replace(/__[A-Z_]+__/g, (m) => values[m] ?? m);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, text);
    files.push(relative(dir, target));
  }
  return { dir, name: name.name, packageName, files: files.sort() };
}
