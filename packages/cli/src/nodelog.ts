import { type ContainerRequest, IMAGE_OPTION_KEY, runtimeNameOf } from "@jobrt/core";
import { quotedText } from "@jobrt/host-services";
import type { NodeLogTarget, StepEvent, StepStartEvent } from "@jobrt/launcher";
import type { Host } from "./host.js";
import { NodeLogWriter, SEVERITY } from "./nodelogsink.js";

/** What the CLI knows of a step that its events do not say. */
export interface NodeLogStep {
  target: NodeLogTarget;
  facility: string;
  nodeName: string;
  uid: number;
  user: string;
  /** jobrt.conf DefRuntimePlugin: the runtime of a component that names none. */
  defaultRuntime: string;
  /** Each component's container request, in order. */
  containers: (ContainerRequest | undefined)[];
  /** `jobrt exec`: the task this process runs (SLURM_PROCID), and the tasks of the whole step. */
  task?: { id: number; stepTasks: number };
  /** Said once, when a line could not go where NodeLog says. */
  warn: (message: string) => void;
}

/** The node log of a step this host runs: where the site's jobrt.conf sends it, and what the step is. */
export function hostNodeLog(host: Host, step: Pick<NodeLogStep, "uid" | "user" | "containers" | "task">): NodeLog {
  return new NodeLog({
    target: host.site.nodeLog,
    facility: host.site.nodeLogFacility,
    nodeName: host.node.nodeName,
    defaultRuntime: host.registry.defaultRuntime,
    warn: (m) => host.log("warn", m),
    ...step,
  });
}

interface Component {
  runtime: string;
  ntasks: number;
  container?: string;
  image?: string;
  containerId?: string;
  bundle?: string;
  digest?: string;
}

/**
 * A value as it is logged: bare when it is plain, else quoted as core's quotedText says (nothing in
 * it can end its field or its line, or change how the line reads).
 */
function quote(value: string): string {
  const v = value.length > 1024 ? `${value.slice(0, 1024)}...` : value;
  return /^[\w.:/@%+=-]+$/.test(v) ? v : quotedText(v);
}

/** `key=a,b` over the components ("-" where one has none); nothing when none has it. */
function field(key: string, values: (string | number | undefined)[]): string[] {
  if (values.every((v) => v === undefined)) return [];
  return [`${key}=${values.map((v) => (v === undefined ? "-" : quote(String(v)))).join(",")}`];
}

/**
 * The node log (docs/cli.md, "The node log"): one line when a step's tasks start (what runs) and
 * one when it ends (how it ended, how long it took), from the step session's events.
 */
export class NodeLog {
  readonly #step: NodeLogStep;
  readonly #writer: NodeLogWriter;
  #ids = "";
  #components: Component[] = [];
  #startedAt = 0;
  #startWritten = false;
  #warned = false;
  /** `jobrt exec`: each task's status, this process's and those that joined it (docs/node-step.md). */
  readonly #taskStatus = new Map<number, number>();

  constructor(step: NodeLogStep) {
    this.#step = step;
    this.#writer = new NodeLogWriter(step.target, step.facility);
  }

  readonly onEvent = (e: StepEvent): void => {
    if (this.#step.target.kind === "off") return;
    if (e.event === "step-start") this.#start(e);
    else if (e.event === "runtime") this.#update(e.component, { runtime: runtimeNameOf(e.type) });
    else if (e.event === "setup")
      this.#update(e.component, {
        ...(e.bundle ? { bundle: e.bundle } : {}),
        ...(e.digest ? { digest: e.digest } : {}),
      });
    else if (e.event === "task-start") this.#writeStart();
    else if (e.event === "task-exit") this.#taskStatus.set(e.task, e.status);
    else if (e.event === "step-end") {
      this.#writeStart();
      const seconds = ((performance.now() - this.#startedAt) / 1000).toFixed(3);
      const failure = e.code ? [`code=${e.code}`, ...(e.causeCode ? [`cause=${quote(e.causeCode)}`] : [])] : [];
      const severity = e.code ? SEVERITY.err : e.status !== 0 ? SEVERITY.notice : SEVERITY.info;
      this.#write(
        severity,
        `step-end ${this.#describe()} status=${e.status}${this.#nodeTasks()} duration=${seconds}s${failure.map((f) => ` ${f}`).join("")}`,
      );
      this.#writer.close();
    }
  };

  /** `jobrt exec`: how many of the step's tasks this node's jobrt ran, and how each ended. */
  #nodeTasks(): string {
    if (!this.#step.task) return "";
    const ends = [...this.#taskStatus].sort(([a], [b]) => a - b).map(([id, status]) => `${id}:${status}`);
    return ` node_tasks=${ends.length}${ends.length ? ` task_status=${ends.join(",")}` : ""}`;
  }

  #start(e: StepStartEvent): void {
    const s = this.#step;
    this.#startedAt = performance.now();
    const task = s.task ? ` task=${s.task.id}` : "";
    this.#ids = `job=${e.jobId} step=${e.stepId}${task} node=${quote(s.nodeName)} uid=${s.uid} user=${quote(s.user)}`;
    this.#components = e.components.map((c, i) => {
      const request = s.containers[i];
      const image = request?.options[IMAGE_OPTION_KEY]?.[0];
      const containerId = request?.options.id?.[0];
      return {
        runtime: c.runtime || s.defaultRuntime,
        ntasks: s.task ? s.task.stepTasks : c.ntasks,
        ...(request?.value !== undefined ? { container: request.value } : {}),
        ...(image !== undefined ? { image } : {}),
        ...(containerId !== undefined ? { containerId } : {}),
      };
    });
  }

  /**
   * Once the first task has started (or the step ends without one): by then setup has said what
   * runs, and sending the line delays no task's start.
   */
  #writeStart(): void {
    if (this.#startWritten || this.#ids === "") return;
    this.#startWritten = true;
    this.#write(SEVERITY.info, `step-start ${this.#describe()}`);
  }

  #update(component: number, facts: Partial<Component>): void {
    const c = this.#components[component];
    if (c) Object.assign(c, facts);
  }

  #describe(): string {
    const cs = this.#components;
    return [
      this.#ids,
      ...field(
        "runtime",
        cs.map((c) => c.runtime),
      ),
      ...field(
        "tasks",
        cs.map((c) => c.ntasks),
      ),
      ...field(
        "container",
        cs.map((c) => c.container),
      ),
      ...field(
        "image",
        cs.map((c) => c.image),
      ),
      ...field(
        "container_id",
        cs.map((c) => c.containerId),
      ),
      ...field(
        "bundle",
        cs.map((c) => c.bundle),
      ),
      ...field(
        "digest",
        cs.map((c) => c.digest),
      ),
    ].join(" ");
  }

  #write(severity: number, message: string): void {
    const warning = this.#writer.write(severity, message);
    if (warning && !this.#warned) {
      this.#warned = true;
      this.#step.warn(warning);
    }
  }
}
