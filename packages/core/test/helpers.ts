import { NOT_SUPPORTED, type RuntimePlugin, definePlugin } from "../src/index.js";

export interface Calls {
  log: string[];
}

/** A real plugin object (not a mock of the registry) that records the hooks it sees. */
export function recordingPlugin(
  name: string,
  calls: Calls,
  overrides: Partial<Parameters<typeof definePlugin>[1]> = {},
): RuntimePlugin {
  return definePlugin(
    { name, type: `runtime/${name}`, version: "1.2.3", capabilities: ["test"], accepts: [] },
    {
      init: (ctx) => {
        calls.log.push(`${name}.init(${ctx.context})`);
      },
      fini: () => {
        calls.log.push(`${name}.fini`);
      },
      setup: () => {
        calls.log.push(`${name}.setup`);
      },
      cleanup: () => {
        calls.log.push(`${name}.cleanup`);
      },
      taskInit: () => {
        calls.log.push(`${name}.taskInit`);
      },
      run: () => {
        calls.log.push(`${name}.run`);
        return NOT_SUPPORTED;
      },
      ...overrides,
    },
  );
}

export function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
