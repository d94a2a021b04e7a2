export { StepCancel } from "./cancel.js";
export { exportEnvironment } from "./env.js";
export { expandFilePattern } from "./filepattern.js";
export { confDirFrom, loadSiteConfig, type NodeLogTarget, nodeNameFor, SYSLOG_FACILITIES, type SiteConfig, spoolDirFor } from "./siteconf.js";
export { findPerl } from "./perl.js";
export { parseTimeLimit } from "./time.js";
export { currentUser, lookupGroup, lookupUser, type UserIdentity } from "./users.js";
export type {
  CancelEvent,
  CleanupEvent,
  OutputEvent,
  PullEvent,
  RuntimeEvent,
  SetupEvent,
  StepEndEvent,
  StepEvent,
  StepStartEvent,
  TaskExitEvent,
  TaskStartEvent,
} from "./session/events.js";
export { type ComponentSpec, type PlannedComponent, type StepSpec, planFromSlurm, planStep } from "./session/plan.js";
export { type SessionOptions, type StepPlan, type StepResult, runSession } from "./session/session.js";
export { type Collected, collectOrphans } from "./session/collect.js";
export { type StepComponentView, type StepView, listSteps } from "./session/steplist.js";
export { openSpool, type Spool } from "./session/spool.js";
export { userSpools } from "./session/userjournals.js";
export { type ProcTrackMode, type ProcessTracker, type TrackerRecord, createTracker, probeTracker } from "./session/proctrack.js";
export { type TaskStartOptions, dropTo, spawnTaskProcess } from "./session/spawn.js";
export type { StdioItem, TaskProcess } from "./session/forker.js";
export type { DeviceConf } from "./devices/resolve.js";
export { type CdiDeviceListing, type CdiInventory, cdiInventory } from "./devices/inventory.js";
export { resolveStepDevices } from "./devices/step.js";
