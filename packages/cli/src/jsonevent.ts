import type { StepEvent } from "@jobrt/launcher";

/**
 * One line of `jobrt run --json`: a step event (see StepEvent in @jobrt/launcher and docs/cli.md)
 * with the time jobrt printed it, in ms since the epoch.
 */
export type JsonEvent = StepEvent & { time: number };

export function jsonEventLine(event: StepEvent): string {
  const line: JsonEvent = { ...event, time: Date.now() };
  return `${JSON.stringify(line)}\n`;
}
