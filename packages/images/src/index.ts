export { acquireImage, resolveForJob, sharedStoreUse } from "./acquire.js";
export { type CachedImage, ensureImage, evictImages, listImages, mayRemove, releaseImage, removeImage, resolveForStep } from "./cache.js";
export { fitImageUser } from "./image-config.js";
export { DIGEST_RE, type ImageReference, parseImageReference } from "./reference.js";
export type { ResolvedImage } from "./resolve.js";
export { type ImageSettings, loadImageSettings } from "./settings.js";
export { type StoreEntry, markName } from "./store.js";
export { type SharedEntry, listShared } from "./shared.js";
export { collectMounts } from "./squashmount.js";
