import { jobrtError } from "./errors.js";
import { type ContainerRequest, REQUEST_OPTIONS } from "./requestoptions.js";

const ROW = REQUEST_OPTIONS.find((r) => r.name === "container-image");
/** `image`: the `options.KEY` the option table gives `--container-image` (`--container-opt image=REF`). Since core 2.1.0. */
export const IMAGE_OPTION_KEY = (ROW?.field ?? "options.image").slice("options.".length);

/**
 * The image a request names (`--container-image REF`, or `--container-opt image=REF`), undefined
 * when it names none. The option table's row makes it `options.image`, a list like every
 * `--container-opt` key, so a second value or an empty one can reach a runtime (the CLI refuses
 * them only for its own option): they are ERR_CONTAINER_REQUEST, naming `runtime` (its meta.type).
 * Since core 2.1.0.
 */
export function containerImage(request: ContainerRequest | undefined, runtime: string): string | undefined {
  const v = request?.options[IMAGE_OPTION_KEY];
  if (v === undefined || v.length === 0) return undefined;
  if (v.length > 1 || v[0] === "") {
    throw jobrtError(
      "ERR_CONTAINER_REQUEST",
      { problem: v.length > 1 ? "--container-image given twice" : "--container-image: empty value" },
      { details: { runtime, key: "--container-image" } },
    );
  }
  return v[0];
}
