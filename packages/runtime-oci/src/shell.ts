/**
 * Whether a shell command is one simple command that `exec` can replace the shell with: no
 * unquoted control operator (`;` `&` `|` newline `(` `)`), not starting with a reserved word, a
 * brace group or a variable assignment. Anything doubtful answers false, which is always safe:
 * the command then runs as the shell's child.
 */
const RESERVED = new Set([
  "!",
  "{",
  "}",
  "case",
  "do",
  "done",
  "elif",
  "else",
  "esac",
  "fi",
  "for",
  "if",
  "in",
  "then",
  "until",
  "while",
  "exec",
  "function",
  "select",
  "time",
  "[[",
]);

export function isSimpleCommand(command: string): boolean {
  const text = command.trim();
  if (text === "") return false;
  const first = /^[^\s]+/.exec(text)?.[0] ?? "";
  if (RESERVED.has(first) || /^[A-Za-z_][A-Za-z0-9_]*=/.test(first) || first.startsWith("#")) return false;
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quote === "'") {
      if (c === "'") quote = undefined;
      continue;
    }
    if (c === "\\") {
      i++;
      continue;
    }
    if (quote === '"') {
      if (c === '"') quote = undefined;
      // $(...) or `...` inside double quotes may hold anything; the words still form one command.
      continue;
    }
    if (c === "'" || c === '"') {
      quote = c;
      continue;
    }
    if (";&|()\n`#".includes(c)) {
      // A `#` inside a word is literal; only a word-initial one starts a comment.
      if (c === "#" && i > 0 && !/\s/.test(text[i - 1] as string)) continue;
      // `2>&1`, `<&3`: an & after a redirection operator duplicates a descriptor.
      if (c === "&" && (text[i - 1] === ">" || text[i - 1] === "<")) continue;
      return false;
    }
    // An unquoted $( ... ) may hold operators; not worth parsing: run it as a child.
    if (c === "$" && text[i + 1] === "(") return false;
  }
  return quote === undefined;
}

/**
 * The task's shell script for a RunTimeRun command. dash does not exec the last command of
 * `sh -c`, so without help the shell would be the task process and die first when the host
 * signals the task's process group. A simple command is exec'ed (the runtime becomes the task
 * and %p names it); otherwise a no-op trap (reset to the default in anything exec'ed) keeps the
 * shell alive while the runtime forwards the signal, so the task ends with the container's status.
 */
export function runScript(command: string): string {
  return `trap : TERM INT HUP\n${isSimpleCommand(command) ? `exec ${command.trim()}` : command}`;
}
