import { type PatternValues, expandPattern } from "./pattern.js";

/** runc's rule for a container id (libcontainer's idRegex); a cgroup dir named after one obeys it too. */
const ID_WORD = /^[A-Za-z0-9_+.-]+$/;

/**
 * The words of a shell command as /bin/sh would split them (quotes removed), leaving out a word
 * that the shell would still expand (an unquoted `$`, a backquote, a glob).
 */
function shellWords(command: string): string[] {
  const out: string[] = [];
  let word = "";
  let inWord = false;
  let expands = false;
  const end = () => {
    if (inWord && !expands) out.push(word);
    word = "";
    inWord = false;
    expands = false;
  };
  for (let i = 0; i < command.length; i++) {
    const c = command[i] as string;
    if (/[\s;&|()<>]/.test(c)) end();
    else if (c === "'") {
      const close = command.indexOf("'", i + 1);
      word += command.slice(i + 1, close < 0 ? command.length : close);
      inWord = true;
      i = close < 0 ? command.length : close;
    } else if (c === "\\") {
      word += command[i + 1] ?? "";
      inWord = true;
      i++;
    } else if (c === '"') {
      inWord = true;
      for (i++; i < command.length && command[i] !== '"'; i++) {
        const d = command[i] as string;
        if (d === "$" || d === "`") expands = true;
        if (d === "\\" && /[$`"\\\n]/.test(command[i + 1] ?? "")) i++;
        word += command[i];
      }
    } else {
      if (c === "$" || c === "`" || c === "*" || c === "?" || c === "[") expands = true;
      word += c;
      inWord = true;
    }
  }
  end();
  return out;
}

/** The words of an expanded command that could be a container id (not an option, a number, a path or `.`/`..`). */
function idWords(command: string): Set<string> {
  const out = new Set<string>();
  for (const w of shellWords(command)) {
    if (ID_WORD.test(w) && !w.startsWith("-") && !/^[0-9]+$/.test(w) && w !== "." && w !== "..") out.add(w);
  }
  return out;
}

/**
 * The container id(s) a task's runtime commands name. oci.conf has no key for the id: it is the
 * word every one of `patterns` (the task's RunTimeCreate or RunTimeRun, RunTimeQuery,
 * RunTimeDelete) contains and that changes with the job, step and task (each task's container
 * needs an id of its own). Anything else a command holds (the runtime's name, its verbs, option
 * values that are the same for every task, paths) is never taken for an id, so a caller that
 * removes what is named after these ids touches only what this task's commands name. A pattern
 * that cannot be expanded here (`%p` without a pid) is left out; none at all gives no id.
 */
export function containerIds(patterns: readonly (string | undefined)[], values: PatternValues): string[] {
  const other: PatternValues = {
    ...values,
    jobId: values.jobId + 1,
    stepId: values.stepId + 1,
    taskId: (values.taskId ?? 0) + 1,
  };
  // The step's container id (%I) names this step alone too.
  if (values.containerId !== undefined) other.containerId = `${values.containerId}x`;
  let common: Set<string> | undefined;
  for (const pattern of patterns) {
    if (pattern === undefined) continue;
    let mine: Set<string>;
    let theirs: Set<string>;
    try {
      mine = idWords(expandPattern(pattern, values, { shell: true }));
      theirs = idWords(expandPattern(pattern, other, { shell: true }));
    } catch {
      continue;
    }
    const varying = [...mine].filter((w) => !theirs.has(w));
    common = new Set(common ? varying.filter((w) => common?.has(w)) : varying);
  }
  return [...(common ?? [])].sort();
}
