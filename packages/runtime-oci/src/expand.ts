import { isJobrtError, jobrtError, messageOf } from "@jobrt/core";
import type { OciConf } from "./conf.js";
import type { StepState } from "./ocistepstate.js";
import { type PatternValues, expandPattern } from "./pattern.js";

/** Expands a path key (no shell quoting); an unknown value is a configuration error. */
export function expandPath(conf: OciConf, key: string, pattern: string, values: PatternValues): string {
  try {
    return expandPattern(pattern, values, { shell: false });
  } catch (error) {
    throw jobrtError(
      "ERR_CONF",
      { where: `${conf.file}: ${key}`, problem: messageOf(error) },
      { details: { file: conf.file, key } },
    );
  }
}

/** Expands a RunTime* command (shell-quoted); a value it cannot take is a configuration error. */
export function expandCommand(st: StepState, key: keyof OciConf["commands"], values: PatternValues): string {
  const pattern = st.conf.commands[key] as string;
  try {
    return expandPattern(pattern, values, { shell: true });
  } catch (error) {
    if (isJobrtError(error, "ERR_CONF_PATTERN")) {
      throw jobrtError(
        "ERR_CONF",
        { where: `${st.conf.file}: ${key}`, problem: `${error.message}, so the command is not run` },
        { details: { file: st.conf.file, key } },
      );
    }
    throw error;
  }
}
