import { type ImageType, IMAGE_TYPES, type ShifterConf } from "./conf.js";
import { reject } from "./reject.js";
import type { UdiRootConf } from "./udiroot.js";

/** A validated image request in Shifter's canonical `type:tag` form. */
export interface ImageRef {
  type: ImageType;
  tag: string;
  /** `type:tag`, with `:latest` added to an untagged docker image (as the image gateway does). */
  canonical: string;
}

export const HEX64_RE = /^[0-9a-f]{64}$/;

/** Shifter keeps only these characters in a tag and silently drops the rest. */
const TAG_CHARS = /^[A-Za-z0-9_:.+@-]+$/;
const TAG_CHARS_SLASH = /^[A-Za-z0-9_:.+@/-]+$/;

/** Converts a glob (`*`, `?`) to an anchored RegExp. */
export function globToRegExp(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\/-]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${body}$`);
}

/**
 * Validates an image request strictly: anything Shifter would silently rewrite (dropped
 * characters, an implied type) is either rejected or made explicit, so the image that runs is the
 * image that was asked for.
 */
export function parseImage(text: string, field: string, conf: ShifterConf, udi: UdiRootConf | undefined): ImageRef {
  const bad = (rule: string) => reject(field, text, rule, "ERR_CONTAINER_IMAGE");
  if (text === "") throw bad("is empty: give an image such as docker:ubuntu:22.04");
  if (text.length > conf.maxImageLength)
    throw bad(`is longer than ${conf.maxImageLength} characters (shifter.conf MaxImageLength)`);
  if (/[\s]/.test(text)) throw bad("contains white space; Shifter would silently remove it and run a different image");
  const colon = text.indexOf(":");
  const prefix = colon < 0 ? "" : text.slice(0, colon);
  let type: ImageType;
  let tag: string;
  if ((IMAGE_TYPES as readonly string[]).includes(prefix)) {
    type = prefix as ImageType;
    tag = text.slice(colon + 1);
  } else {
    const def = udi?.defaultImageType;
    if (!def || !(IMAGE_TYPES as readonly string[]).includes(def)) {
      throw bad(`has no image type: write it as docker:${text} (types: ${IMAGE_TYPES.join(", ")})`);
    }
    type = def as ImageType;
    tag = text;
  }
  if (tag === "") throw bad(`has an empty name after "${type}:"`);
  const chars = type === "docker" || type === "local" ? TAG_CHARS_SLASH : TAG_CHARS;
  if (!chars.test(tag)) {
    const allowed =
      type === "docker" || type === "local" ? "letters, digits, _ : . + @ - /" : "letters, digits, _ : . + @ -";
    throw bad(`contains characters Shifter silently drops (allowed for ${type}: ${allowed})`);
  }
  if (tag.includes("..")) throw bad("contains '..'");
  if (!conf.allowedImageTypes.includes(type)) {
    throw bad(
      `image type ${type} is not allowed here (shifter.conf AllowedImageTypes: ${conf.allowedImageTypes.join(", ")})`,
    );
  }
  if (type === "id" && !HEX64_RE.test(tag)) throw bad("an id: image must be 64 lower-case hex digits");
  if (type === "local") {
    if (!udi?.allowLocalChroot)
      throw bad("local: images need allowLocalChroot=1 in udiRoot.conf as well as AllowedImageTypes");
    if (!tag.startsWith("/")) throw bad("a local: image must be an absolute path");
    if (tag.includes("//") || (tag.length > 1 && tag.endsWith("/")))
      throw bad("a local: path must be written without '//' or a trailing '/'");
  }
  if (type === "docker" || type === "custom") {
    const parts = tag.split("/");
    if (parts.some((p) => p === "")) throw bad("has an empty path component ('//', or a leading or trailing '/')");
    if (/^[-.:@+]/.test(tag)) throw bad("must start with a letter, digit or '_'");
  }
  // The gateway adds ":latest" to an untagged docker image; do it here so pins and messages agree.
  if (type === "docker" && !(tag.split("/").at(-1) as string).includes(":") && !tag.includes("@"))
    tag = `${tag}:latest`;
  const canonical = `${type}:${tag}`;
  const denied = conf.imageDeny.find((g) => globToRegExp(g).test(canonical));
  if (denied) throw bad(`is denied by shifter.conf ImageDeny pattern ${JSON.stringify(denied)}`);
  if (conf.imageAllow.length > 0 && !conf.imageAllow.some((g) => globToRegExp(g).test(canonical))) {
    throw bad(`is not in shifter.conf ImageAllow (${conf.imageAllow.join(", ")})`);
  }
  return { type, tag, canonical };
}
