export type { JsonEvent } from "./jsonevent.js";
export { main } from "./main.js";
