export { type CreateOptions, type Created, TEMPLATE_DIR, createRuntimeProject } from "./create.js";
