import { hostname } from "node:os";
import { type ImageSettings, listShared, nodeMarks, pruneShared } from "@jobrt/images";
import { jobrtError } from "@jobrt/core";

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

/** `jobrt images --shared [list|prune]`: the cluster's image store (SharedStore in images.conf). */
export function sharedImagesCommand(
  settings: ImageSettings,
  action: "list" | "prune",
  all: boolean,
  json: boolean,
): number {
  const root = settings.sharedStore;
  if (root === undefined)
    throw jobrtError("ERR_USAGE", {
      problem: `images --shared: ${settings.file ?? "images.conf"} sets no SharedStore`,
    });
  if (action === "list") {
    const entries = listShared(root).map((e) => ({ ...e, users: nodeMarks(root, e.hex) }));
    if (json) {
      process.stdout.write(
        `${JSON.stringify(
          entries.map((e) => ({
            ...e.meta,
            file: e.file,
            size: e.size,
            lastUsed: new Date(e.lastUsed).toISOString(),
            mountedOn: e.users,
          })),
          null,
          2,
        )}\n`,
      );
      return 0;
    }
    const total = entries.reduce((n, e) => n + e.size, 0);
    process.stdout.write(
      `shared store ${root}: ${entries.length} images, ${mib(total)} of ${mib(settings.sharedStoreSize)}\n`,
    );
    for (const e of entries) {
      process.stdout.write(
        `shared\t${e.meta.digest}\t${mib(e.size)}\t${new Date(e.lastUsed).toISOString()}\t${e.users.length > 0 ? `mounted on ${e.users.join(",")}` : "idle"}\t${e.meta.reference}\n`,
      );
    }
    return 0;
  }
  if ((process.getuid?.() ?? -1) !== 0)
    throw jobrtError("ERR_USAGE", { problem: "images --shared prune: only root changes the shared store" });
  pruneShared(settings, all, hostname().split(".")[0] ?? "localhost", (e, result) => {
    process.stdout.write(
      result === "removed"
        ? `removed ${e.meta.reference} (${e.meta.digest}) from ${root}\n`
        : `kept ${e.meta.reference} (${e.meta.digest}): ${result}\n`,
    );
  });
  return 0;
}
