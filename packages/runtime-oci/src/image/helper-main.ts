/**
 * The image helper: does one thing to one image of a store, as the store's owner (the plugin
 * starts it as the job user for a private store, as root for the public one) and under that
 * image's lock (`flock <hex>.lock`), so concurrent steps share one pull and nothing is removed
 * while in use. Reads a HelperRequest as JSON on stdin, prints a HelperResponse as JSON.
 */
import { readFileSync } from "node:fs";
import { type HelperRequest, type HelperResponse, handle } from "./helper.js";

const request = JSON.parse(readFileSync(0, "utf8")) as HelperRequest;
process.umask(request.op === "fetch" && request.spec.public ? 0o022 : 0o077);
handle(request).then(
  (response: HelperResponse) => process.stdout.write(JSON.stringify(response)),
  (error: unknown) => {
    process.stdout.write(JSON.stringify({ ok: false, error: (error as Error).message } satisfies HelperResponse));
  },
);
