export { default } from "./plugin.js";
