import { evictImages, listImages, loadImageSettings, mayRemove, removeImage } from "@jobrt/images";
import { usage } from "../args.js";
import { siteConfDir } from "../confdir.js";
import { say } from "../say.js";
import { sharedImagesCommand } from "./sharedimages.js";

interface ImagesArgs {
  action: "list" | "prune";
  all: boolean;
  json: boolean;
  shared: boolean;
  confDir?: string;
}

function parseImagesArgs(args: string[]): ImagesArgs | "help" {
  const out: ImagesArgs = { action: "list", all: false, json: false, shared: false };
  let actionGiven = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === "-h" || a === "--help") return "help";
    if (a === "--all" || a === "--json" || a === "--shared") {
      out[a.slice(2) as "all" | "json" | "shared"] = true;
    } else if (a === "--conf-dir" || a.startsWith("--conf-dir=")) {
      const v = a.includes("=") ? a.slice(a.indexOf("=") + 1) : args[++i];
      if (!v) throw usage("--conf-dir needs a value");
      out.confDir = v;
    } else if (!actionGiven && (a === "list" || a === "prune")) {
      out.action = a;
      actionGiven = true;
    } else throw usage(`images: unknown argument ${JSON.stringify(a)} (see jobrt images --help)`);
  }
  if (out.all && out.action !== "prune") throw usage("images: --all goes with prune");
  if (out.json && out.action !== "list") throw usage("images: --json goes with list");
  return out;
}

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

/** `jobrt images [list|prune]`: the node's image cache of runtime oci. */
export async function imagesCommand(args: string[]): Promise<number> {
  const parsed = parseImagesArgs(args);
  if (parsed === "help") {
    process.stdout.write((await import("../help.js")).IMAGES_HELP);
    return 0;
  }
  const settings = loadImageSettings(siteConfDir(parsed.confDir));
  if (parsed.shared) return sharedImagesCommand(settings, parsed.action, parsed.all, parsed.json);
  if (parsed.action === "list") {
    const entries = listImages(settings);
    if (parsed.json) {
      process.stdout.write(
        `${JSON.stringify(
          entries.map((e) => ({
            ...e.meta,
            store: e.store,
            lastUsed: new Date(e.lastUsed).toISOString(),
            inUse: e.users.length,
          })),
          null,
          2,
        )}\n`,
      );
      return 0;
    }
    const total = entries.reduce((n, e) => n + e.meta.size, 0);
    process.stdout.write(
      `cache ${settings.cacheDir}: ${entries.length} images, ${mib(total)} of ${mib(settings.cacheSize)}\n`,
    );
    for (const e of entries) {
      const store = e.store.slice(settings.cacheDir.length + 1);
      process.stdout.write(
        `${store}\t${e.meta.digest}\t${mib(e.meta.size)}\t${new Date(e.lastUsed).toISOString()}\t${e.users.length > 0 ? `in use by ${e.users.length}` : "idle"}\t${e.meta.reference}\n`,
      );
    }
    return 0;
  }
  let status = 0;
  if (!parsed.all) {
    await evictImages(settings, undefined, (m) => process.stdout.write(`${m}\n`));
    return 0;
  }
  for (const e of listImages(settings).filter(mayRemove)) {
    const result = await removeImage(e);
    if (result === "removed") process.stdout.write(`removed ${e.meta.reference} (${e.meta.digest}) from ${e.store}\n`);
    else if (result === "in use") process.stdout.write(`kept ${e.meta.reference} (${e.meta.digest}): in use\n`);
    else {
      say(`cannot remove ${e.dir}: ${result}`);
      status = 1;
    }
  }
  return status;
}
