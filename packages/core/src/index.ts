export {
  type ConfLocation,
  type ConfSchema,
  type ConfValues,
  type FieldSpec,
  type ParseConfOptions,
  type ParsedConf,
  confError,
  loadConfFile,
  parseConf,
  parseSlurmBool,
} from "./conf.js";
export { readConfText } from "./conffile.js";
export { parseSize } from "./size.js";
export { containerIdProblem } from "./containerid.js";
export { IMAGE_OPTION_KEY, containerImage } from "./containerimage.js";
export { type AcceptedField, checkAccepted } from "./accepts.js";
export {
  type ContainerRequest,
  REQUEST_FIELDS,
  REQUEST_OPTIONS,
  type RequestField,
  type RequestOption,
  emptyRequest,
} from "./requestoptions.js";
export { checkDevicesAccepted } from "./deviceaccepts.js";
export { type CatalogEntry, type ErrorParams, catalogEntry } from "./catalog.js";
export {
  type CommandLookup,
  type ContainerView,
  type ViewMount,
  listContainerDir,
  lookupCommand,
} from "./commandlookup.js";
export { injectedMpiProblem } from "./mpiabi.js";
export type {
  CheckContext,
  CleanupContext,
  DescribeContext,
  InitContext,
  SetupContext,
  StatefulContext,
  StepHookContext,
  TaskHookContext,
  ToolsContext,
  ValidateContext,
} from "./context.js";
export {
  DEVICE_HOOK_NAMES,
  type DeviceEdits,
  type DeviceHookEdit,
  type DeviceHookName,
  type DeviceIntelRdtEdit,
  type DeviceMountEdit,
  type DeviceNodeEdit,
  HOST_NAMESPACES,
  type HostNamespace,
} from "./devices.js";
export {
  type ErrorCode,
  JobrtError,
  type JobrtErrorDetails,
  exitStatusOf,
  isJobrtError,
  jobrtError,
  messageOf,
} from "./errors.js";
export { type RuntimeName, normalizeRuntimeName, runtimeNameOf } from "./names.js";
export {
  type CheckFinding,
  HOOK_NAMES,
  type HookName,
  type MaybePromise,
  NOT_SUPPORTED,
  type NotSupported,
  type PluginOrigin,
  RUNTIME_API_VERSION,
  RUNTIME_IDX_INVALID,
  type RuntimeHooks,
  type RuntimeMeta,
  type RuntimePlugin,
  type StepDescription,
  type RuntimeTool,
  assertRuntimePlugin,
  definePlugin,
  isCheckFinding,
  isExecSpec,
  isRuntimeTool,
} from "./plugin.js";
export {
  type LoadedRuntime,
  RuntimeRegistry,
  type RuntimeRegistryOptions,
  type StatefulCall,
  type StepCall,
  type StepStateText,
} from "./registry.js";
export { carriesRawBytes, decodeBytes, encodeBytes } from "./rawbytes.js";
export { MAX_STEP_STATE_BYTES, serializeStepState } from "./stepstate.js";
export {
  DEFAULT_ALLOWED_RUNTIMES,
  DEFAULT_RUNTIME,
  type LocatedPackage,
  type PackageResolverOptions,
  type ResolvedRuntime,
  type RuntimeNameResolver,
  type RuntimeResolver,
  createPackageResolver,
  locateRuntimePackage,
} from "./resolver.js";
export type {
  ClientInfo,
  PullProgress,
  ExecSpec,
  HetInfo,
  HostSupervision,
  LogLevel,
  Logger,
  MissingCommandCheck,
  NodeConf,
  RuntimeContext,
  SignalDelivery,
  StepKind,
  StepRecord,
  StopTarget,
  TaskRecord,
} from "./types.js";
export { packageVersion } from "./version.js";
