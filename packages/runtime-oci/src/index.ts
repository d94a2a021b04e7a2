import { ociPlugin } from "./plugin.js";

export { evictImages, listImages, mayRemove, removeImage } from "./image/cache.js";
export { type ImageSettings, loadImageSettings } from "./image/settings.js";
export type { StoreEntry } from "./image/store.js";

export default ociPlugin;
