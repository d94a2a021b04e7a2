import { jobrtError } from "@jobrt/core";

/** Time-outs of the control commands, in ms. Every runtime command is bounded. */
export const COMMAND_TIMEOUTS = { create: 60_000, start: 30_000, query: 10_000, kill: 10_000, delete: 30_000 } as const;
export type CommandTimeouts = { -readonly [K in keyof typeof COMMAND_TIMEOUTS]: number };

/** The environment variable (in jobrt's own environment) that overrides some of the time-outs. */
export const TIMEOUTS_VARIABLE = "JOBRT_OCI_TIMEOUTS";

/**
 * COMMAND_TIMEOUTS with the overrides of $JOBRT_OCI_TIMEOUTS (`create=S,start=S,query=S,kill=S,delete=S`,
 * seconds, any subset), for a site whose runtime is slower than runc, or a test that must see a
 * time-out fire within seconds. A bad value is an error naming the variable and the rule.
 */
export function commandTimeouts(text: string | undefined = process.env[TIMEOUTS_VARIABLE]): CommandTimeouts {
  const t: CommandTimeouts = { ...COMMAND_TIMEOUTS };
  if (text === undefined || text.trim() === "") return t;
  for (const item of text.split(",")) {
    const m = /^\s*([a-z]+)\s*=\s*([0-9]+(?:\.[0-9]+)?)\s*$/.exec(item);
    const key = m?.[1] as keyof CommandTimeouts | undefined;
    const seconds = Number(m?.[2]);
    if (!m || key === undefined || !(key in t) || !(seconds > 0) || seconds > 86_400) {
      throw jobrtError(
        "ERR_CONF",
        {
          where: `$${TIMEOUTS_VARIABLE}`,
          problem: `${JSON.stringify(item.trim())} is not KEY=SECONDS with KEY one of ${Object.keys(t).join(", ")} and 0 < SECONDS <= 86400`,
        },
        { details: { variable: TIMEOUTS_VARIABLE } },
      );
    }
    t[key] = Math.round(seconds * 1000);
  }
  return t;
}
