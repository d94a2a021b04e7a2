/**
 * The image helper: does one thing to one image of a store, as the store's owner (the plugin
 * starts it as the job user for a private store, as root for the public one) and under that
 * image's lock (`flock <hex>.lock`), so concurrent steps share one pull and nothing is removed
 * while in use. Reads a HelperRequest as JSON on stdin, prints a HelperResponse as JSON. The lock
 * file goes with its image (lock.ts).
 */
import { readFileSync } from "node:fs";
import { type HelperRequest, type HelperResponse, handle } from "./helper.js";
import { dropLockIfUnused, holdsCurrentLock } from "./lock.js";

const request = JSON.parse(readFileSync(0, "utf8")) as HelperRequest;
const { store, hex } = request.op === "fetch" ? request.spec : request;
process.umask(request.op === "fetch" && request.spec.public ? 0o022 : 0o077);
const done = (response: HelperResponse) => process.stdout.write(JSON.stringify(response));
if (!holdsCurrentLock(store, hex)) {
  // The lock file was unlinked (its image removed) while we waited for it: the caller locks anew.
  done({ ok: false, error: "the image lock was removed while waiting for it", staleLock: true });
} else {
  handle(request, (line) => process.stderr.write(line)).then(
    (response: HelperResponse) => {
      dropLockIfUnused(store, hex);
      done(response);
    },
    (error: unknown) => {
      dropLockIfUnused(store, hex);
      done({ ok: false, error: (error as Error).message });
    },
  );
}
