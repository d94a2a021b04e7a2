import { ociPlugin } from "./plugin.js";

export { type BundleConfig, type Mount, type OciConfig, parseBundleConfig, parseVolume, rewriteConfig } from "./bundle.js";
export {
  type CreateEnvFileMode,
  DEFAULT_CONTAINER_ID,
  OCI_CONF_SCHEMA,
  OCI_HOOK_KINDS,
  type OciConf,
  type OciMode,
  embeddedDefaultConf,
  loadOciConf,
  parseOciConf,
} from "./conf.js";
export { compileEre } from "./ere.js";
export { type CachedImage, evictImages, listImages, mayRemove, removeImage } from "./image/cache.js";
export { type ImageReference, parseImageReference } from "./image/reference.js";
export { type ImageSettings, loadImageSettings } from "./image/settings.js";
export type { ImageMeta, StoreEntry } from "./image/store.js";
export { type EnvFile, filterEnvStrings, formatEnvFile, mergeBundleEnv } from "./env.js";
export {
  PATTERN_CHARS,
  type PatternChar,
  PatternValueError,
  type PatternValues,
  expandPattern,
  findPatternProblem,
  quoteArgv,
  shellQuoteIn,
} from "./pattern.js";
export { COMMAND_TIMEOUTS, type CommandTimeouts, TIMEOUTS_VARIABLE, commandTimeouts, printedStepId, stepDirName } from "./plugin.js";
export { SUPERVISOR_FAILURE } from "./supervisor.js";

export default ociPlugin;
