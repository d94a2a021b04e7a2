import { resolve } from "node:path";
import { type ComponentSpec, type UserIdentity, expandFilePattern, exportEnvironment, jobUser } from "@jobrt/launcher";
import { type ParsedCommandLine, flag, one, positiveInt, requestFromOptions, usage } from "./args.js";
import { rawEnvironment } from "./rawinput.js";

function checkPattern(pattern: string, option: string): void {
  if (/%\d*$/.test(pattern.replace(/%%/g, ""))) throw usage(`${option}: ${JSON.stringify(pattern)} ends with a lone %`);
  expandFilePattern(pattern, option, { jobId: 1, stepId: 0, taskId: 0, nodeName: "n", nodeId: 0 });
}

/** Turns parsed components into launcher specs, checking every value first. */
export function componentSpecs(parsed: ParsedCommandLine): ComponentSpec[] {
  // As with srun, output, input, environment and directory options carry over to later
  // components unless a component sets its own; -l labels the whole step.
  const inherited = ["output", "error", "input", "export", "chdir"];
  parsed.components.forEach((c, index) => {
    const previous = parsed.components[index - 1];
    if (!previous) return;
    for (const name of inherited) {
      const v = previous.options.get(name);
      if (v && !c.options.has(name)) c.options.set(name, v);
    }
  });
  const labelAll = parsed.components.some((c) => flag(c.options, "label"));
  const specs = parsed.components.map((c, index): ComponentSpec => {
    const where = parsed.components.length > 1 ? `component ${index}: ` : "";
    const o = c.options;
    const ntasks = positiveInt(one(o, "ntasks") ?? "1", "ntasks", 100_000);
    const runtime = one(o, "runtime");
    const cwd = resolve(one(o, "chdir") ?? process.cwd());
    for (const [name, option] of [
      ["output", "--output"],
      ["error", "--error"],
    ] as const) {
      const p = one(o, name);
      if (p !== undefined) checkPattern(p, `${where}${option}`);
    }
    const input = one(o, "input");
    if (input !== undefined && input !== "all" && input !== "none" && !/^\d+$/.test(input))
      checkPattern(input, `${where}--input`);
    if (input === "") throw usage(`${where}--input: empty value`);
    const container = requestFromOptions(o);
    return {
      argv: c.argv,
      ntasks,
      ...(runtime !== undefined ? { runtime } : {}),
      ...(container ? { container } : {}),
      cwd,
      env: exportEnvironment(one(o, "export") ?? "ALL", rawEnvironment()),
      io: {
        label: labelAll,
        ...(one(o, "output") !== undefined ? { output: one(o, "output") as string } : {}),
        ...(one(o, "error") !== undefined ? { error: one(o, "error") as string } : {}),
        ...(input !== undefined ? { input } : {}),
      },
    };
  });
  const total = specs.reduce((n, s) => n + s.ntasks, 0);
  for (const s of specs) {
    if (s.io.input !== undefined && /^\d+$/.test(s.io.input) && Number(s.io.input) >= total) {
      throw usage(`--input: task ${s.io.input} does not exist (the step has ${total} task${total === 1 ? "" : "s"})`);
    }
  }
  return specs;
}

/** --uid/--gid: root may run tasks as anyone; others only as themselves. */
export function stepUser(parsed: ParsedCommandLine): UserIdentity {
  return jobUser(one(parsed.step, "uid"), one(parsed.step, "gid"));
}
