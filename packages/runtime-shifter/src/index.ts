export { default } from "./plugin.js";
export { shifterimgPath } from "./plugin.js";
export { DEFAULT_SHIFTER_PATH, DEFAULT_UDIROOT_CONF, type ImageType, IMAGE_TYPES, type PullPolicy, SHIFTER_CONF_SCHEMA, type ShifterConf, loadShifterConf } from "./conf.js";
export { BUILTIN_STRIP_ENV } from "./env.js";
export { type PinnedImage, buildExecSpec, shifterOptions } from "./exec.js";
export { type ImageRef, parseImage } from "./image.js";
export { FROM_IMAGE, type ShifterRequest, validateRequest } from "./request.js";
export { type UdiRootConf, parseUdiRootConf } from "./udiroot.js";
export { type Volume, parseVolume } from "./volume.js";
