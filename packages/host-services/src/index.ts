// The Linux plumbing the launcher and runtime plugins share (docs/architecture.md, "Host
// services"): plugins may not import the launcher and core spawns nothing, so it lives here once.
export { type FileUser, asUser } from "./asuser.js";
export { type CgroupMembership, isCgroup2, procCgroups } from "./cgroup.js";
export { executableProblem } from "./executable.js";
export {
  type FileOp,
  type FileOpResult,
  readNoFollow,
  removeEmptyDir,
  runFileOps,
  writeAtomic,
} from "./fileops.js";
export { type DirOwner, makeDir, makeDirs } from "./makedir.js";
export { type MountInfo, readMountInfo } from "./mountinfo.js";
export { othersMayReplace } from "./othersmayreplace.js";
export { type ProcStat, procStat, processRunning } from "./procstat.js";
export { type RemoveTreeOptions, removeTree } from "./removetree.js";
export { quotedText, shownText } from "./showntext.js";
export { type WaitStatus, decodeWaitStatus } from "./waitstatus.js";
export { type ToolOptions, type ToolResult, runTool } from "./runtool.js";
export { type SyscallName, syscallNumbers } from "./syscalls.js";
export { type StepShareOptions, joinStepShare, leaveStepShare, publishStepShare, readStepShare } from "./stepshare.js";
