export { acquireImage, resolveForJob, sharedStoreUse } from "./acquire.js";
export {
  type CachedImage,
  ensureImage,
  evictImages,
  listImages,
  mayRemove,
  releaseImage,
  removeImage,
  resolveForStep,
} from "./cache.js";
export { fitImageUser } from "./imageconfig.js";
export { DIGEST_RE, type ImageReference, parseImageReference } from "./reference.js";
export type { ResolvedImage } from "./resolve.js";
export { type ImageSettings, loadImageSettings } from "./settings.js";
export { type StoreEntry, markName } from "./store.js";
export { type SharedEntry, listShared, nodeMarks } from "./shared.js";
export { type PruneResult, pruneShared } from "./sharedprune.js";
export { collectImages } from "./sharedgc.js";
export { type StepImage, acquireStepImage, checkImageTrust, releaseStepImage } from "./stepimage.js";
