import { jobrtError } from "@jobrt/core";
import type { OptionValues } from "./args.js";

/**
 * One option that jobrt's SPANK plugin gives srun (packages/spank, docs/slurm.md): pyxis's name and
 * meaning, and either the `jobrt exec` option it becomes or why jobrt refuses it. The plugin's C
 * header is generated from this table at build, so srun's --help and jobrt agree.
 */
export interface SpankOption {
  name: string;
  /** What stands for the value in srun --help; none: a flag. */
  arg?: string;
  usage: string;
  /** Why srun refuses it at submission (jobrt has no such feature); none: jobrt runs it. */
  refused?: string;
}

/** Every option the plugin registers, in the order srun --help lists them. */
export const SPANK_OPTIONS: readonly SpankOption[] = [
  {
    name: "runtime",
    arg: "NAME",
    usage: "[jobrt] run each task through this jobrt runtime (jobrt runtimes lists them)",
  },
  {
    name: "container-image",
    arg: "[USER@][REGISTRY#]IMAGE[:TAG]",
    usage: "[jobrt] run each task in a container of this image (or docker://, oci:, oci-archive: references)",
  },
  {
    name: "container-mounts",
    arg: "SRC[:DST[:ro|rw]][,...]",
    usage: "[jobrt] bind mount host paths into the container",
  },
  { name: "container-workdir", arg: "PATH", usage: "[jobrt] working directory inside the container" },
  {
    name: "container-env",
    arg: "NAME[,NAME...]",
    usage: "[jobrt] these variables keep the task's values over the image's",
  },
  { name: "container-device", arg: "NAME[,NAME...]", usage: "[jobrt] CDI devices for the container" },
  ...[
    ["container-name", "NAME", "named containers reused by later steps"],
    ["container-save", "PATH", "saving the container as an image"],
    ["container-mount-home", undefined, "mounting the home directory by option (use --container-mounts)"],
    ["no-container-mount-home", undefined, "mounting the home directory by option (use --container-mounts)"],
    ["container-remap-root", undefined, "remapping the user to root"],
    ["no-container-remap-root", undefined, "remapping the user to root"],
    ["container-writable", undefined, "choosing a writable or read-only root filesystem"],
    ["container-readonly", undefined, "choosing a writable or read-only root filesystem"],
    ["container-entrypoint", undefined, "running the image's entrypoint"],
  ].map(([name, arg, what]) => refusedOption(name!, arg, what!)),
];

function refusedOption(name: string, arg: string | undefined, what: string): SpankOption {
  const refused = `jobrt has no ${what}`;
  return { name, ...(arg ? { arg } : {}), usage: `[jobrt] refused: ${refused}`, refused };
}

/** The variable by which the plugin hands a task's options to `jobrt exec`: lines of NAME=VALUE. */
export const SPANK_OPTIONS_VARIABLE = "JOBRT_SPANK_OPTIONS";

function spankError(option: string, problem: string): Error {
  return jobrtError("ERR_USAGE", { problem: `srun --${option}: ${problem}` });
}

/** The `jobrt exec` options that the plugin's options of one task stand for. */
export function optionsFromSpank(encoded: string, taskEnv: NodeJS.ProcessEnv): OptionValues {
  const out: OptionValues = new Map();
  const add = (name: string, value: string) => out.set(name, [...(out.get(name) ?? []), value]);
  for (const line of encoded.split("\n").filter((l) => l !== "")) {
    const eq = line.indexOf("=");
    const name = eq < 0 ? line : line.slice(0, eq);
    const value = eq < 0 ? "" : line.slice(eq + 1);
    const def = SPANK_OPTIONS.find((o) => o.name === name);
    if (!def) throw spankError(name, "not an option of jobrt's SPANK plugin (a plugin of another version?)");
    if (def.refused) throw spankError(name, def.refused);
    for (const [option, v] of translate(name, value, taskEnv)) add(option, v);
  }
  return out;
}

function translate(name: string, value: string, taskEnv: NodeJS.ProcessEnv): [string, string][] {
  const items = () => value.split(",").filter((v) => v !== "");
  switch (name) {
    case "container-image":
      return [["container-image", imageReference(value)]];
    case "container-mounts":
      return items().map((m) => ["container-volume", volume(m)]);
    case "container-env":
      return items().map((n) => ["container-env", `${n}=${taskEnv[n] ?? ""}`]);
    case "container-device":
      return items().map((d) => ["container-device", d]);
    default:
      return [[name, value]];
  }
}

/** pyxis's `[USER@][REGISTRY#]IMAGE[:TAG]`, or a reference jobrt takes as it is. */
function imageReference(value: string): string {
  if (/^(?:docker:\/\/|oci:|oci-archive:)/.test(value)) return value;
  if (value.startsWith("/") || value.startsWith("."))
    throw spankError(
      "container-image",
      `${value}: an image file is enroot's; give oci-archive:${value} for an OCI archive`,
    );
  const hash = value.indexOf("#");
  const at = value.indexOf("@");
  if (at >= 0 && (hash < 0 || at < hash))
    throw spankError("container-image", `${value}: USER@ is enroot's credentials, which jobrt has not; drop it`);
  const registry = hash < 0 ? "docker.io" : value.slice(0, hash);
  const image = hash < 0 ? value : value.slice(hash + 1);
  if (registry === "" || image === "") throw spankError("container-image", `${value}: expected [REGISTRY#]IMAGE[:TAG]`);
  return `docker://${registry}/${image}`;
}

/** One of pyxis's mounts, `SRC[:DST[:FLAGS]]`, as jobrt's `SRC:DST[:ro|rw]`. */
function volume(mount: string): string {
  const [src, dst = src, flags, ...rest] = mount.split(":");
  if (!src || rest.length > 0) throw spankError("container-mounts", `${mount}: expected SRC[:DST[:ro|rw]]`);
  if (flags !== undefined && flags !== "ro" && flags !== "rw")
    throw spankError("container-mounts", `${mount}: jobrt takes the flags ro and rw only, not ${flags}`);
  return flags === undefined ? `${src}:${dst}` : `${src}:${dst}:${flags}`;
}
