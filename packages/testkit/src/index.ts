export { CHECKS, type CheckId, type CheckLevel } from "./checks.js";
export { describeRuntimeConformance } from "./conformance.js";
export { asJobrtError, describeError } from "./errors.js";
export { argvProblems, envCwdProblems, resolveProgram, shellProblems } from "./execspec.js";
export { type JobUser, type TestNode, type TestStepOptions, containerRequest, createTestNode, createTestStep, uniqueJobId } from "./fixtures.js";
export { type PluginHost, pluginHost } from "./host.js";
export { type LaunchOptions, type LaunchResult, launchTask, processGroupAlive } from "./launch.js";
export type {
  ConformanceCapabilities,
  ConformanceOptions,
  InvalidCase,
  LaunchCheckOptions,
  Lazy,
  PluginSource,
} from "./options.js";
