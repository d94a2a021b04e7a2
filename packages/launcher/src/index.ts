export { StepCancel } from "./cancel.js";
export { exportEnvironment, slurmTaskVariables } from "./env.js";
export { expandFilePattern, type FilePatternValues, isPerTask } from "./filepattern.js";
export { claimExecTask, claimStep, type StepClaim } from "./jobids.js";
export { functionSink, type LineSink, type LineTransform, pipeLines } from "./lines.js";
export { confDirFrom, defaultSpoolDir, loadSiteConfig, type SiteConfig } from "./siteconf.js";
export {
  type ComponentSpec,
  type PlannedComponent,
  type RunStepOptions,
  type StepEvent,
  type StepResult,
  type StepSpec,
  type TaskIo,
  planStep,
  runStep,
  statusOf,
  taskEnvironment,
} from "./step.js";
export { parseTimeLimit } from "./time.js";
export { currentUser, lookupGroup, lookupUser, type UserIdentity } from "./users.js";
export { bootId, isSameProcess, processStartTime } from "./proc.js";
export { type CollectResult, type OrphanFilter, type OrphanStep, type StepFile, collectOrphan, findOrphanSteps, recordTaskPid, writeStepFile } from "./steprecord.js";
