export { StepCancel } from "./cancel.js";
export { exportEnvironment } from "./env.js";
export { expandFilePattern } from "./filepattern.js";
export { createHost, type Host, type HostOptions } from "./host.js";
export { confDirFrom, type NodeLogTarget, SYSLOG_FACILITIES, type SiteConfig } from "./siteconf.js";
export { findPerl } from "./perl.js";
export { parseTimeLimit } from "./time.js";
export { currentUser, jobUser, lookupUser, type UserIdentity } from "./users.js";
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
export { runSession } from "./session/session.js";
export { NodeStepListener, joinerCommand, openNodeStep } from "./session/nodestep/listener.js";
export type { NodeStepOptions } from "./session/nodestep/joinedtask.js";
export type { JoinRequest } from "./session/nodestep/joinrequest.js";
export { nodeTaskCount } from "./session/slurmenv.js";
export type { SessionOptions, StepPlan, StepResult } from "./session/sessionoptions.js";
export type { Collected } from "./session/journal/collect.js";
export type { StepComponentView, StepView } from "./session/journal/steplist.js";
export type { ProcTrackMode, TrackerRecord } from "./session/proctrack/proctrack.js";
export { type TaskGroup, type TaskStart, createTaskGroup } from "./session/task/taskgroup.js";
export type { TaskEnd } from "./session/task/supervision.js";
export type { StdioItem, TaskProcess } from "./session/forker/forker.js";
export type { DeviceConf } from "./devices/resolve.js";
export { type CdiDeviceListing, type CdiInventory, cdiInventory } from "./devices/inventory.js";
export { resolveStepDevices } from "./devices/step.js";
export { PMI_FD_CAPABILITY, pmiDescriptor, requirePmiCapability } from "./session/wireup/pmi.js";
export {
  CONTAINER_CAPABILITY,
  type WireupEdits,
  type WireupKind,
  wireupEdits,
  wireupKind,
} from "./session/wireup/wireupedits.js";
