import type { ImageSettings } from "./settings.js";

/**
 * skopeo's global flags naming the site's trust policy and signature lookaside config. Given to
 * every call, root's and a job user's alike: without them skopeo reads the user's own
 * ~/.config/containers/policy.json and registries.d first, so a job user could loosen the site's
 * policy (docs/images.md, "Trust").
 */
export function policyFlags(settings: ImageSettings): string[] {
  return ["--policy", settings.trustPolicy, "--registries.d", settings.trustRegistriesDir];
}
