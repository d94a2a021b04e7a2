import { ociPlugin } from "./plugin.js";

export default ociPlugin;
