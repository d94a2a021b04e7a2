export { CHECKS } from "./checks.js";
export { describeRuntimeConformance } from "./conformance.js";
export { argvProblems, envCwdProblems, shellProblems } from "./execspec.js";
export { type TestNode, type TestStepOptions, containerRequest, createTestNode, createTestStep } from "./fixtures.js";
export { type PluginHost, pluginHost } from "./host.js";
export { type LaunchOptions, type LaunchResult, launchTask } from "./launch.js";
export type { ConformanceOptions, InvalidCase, PluginSource } from "./options.js";
