/**
 * Characters that change what a reader of a log line or a terminal sees rather than show as
 * themselves: controls (Cc: C0, DEL, C1, whose U+009B is a terminal's CSI), format characters (Cf:
 * the bidi overrides such as U+202E, zero-width ones, soft hyphen), the line and paragraph
 * separators (Zl, Zp: U+2028, U+2029) and lone surrogates (Cs: a byte that is not UTF-8, as
 * rawbytes.ts carries it). The backslash is escaped too, so every escape is the text's own.
 */
const UNSHOWN = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\\]/gu;

function escapeOne(c: string): string {
  if (c === "\\") return "\\\\";
  const point = c.codePointAt(0)!;
  return point <= 0xff ? `\\x${point.toString(16).padStart(2, "0")}` : `\\u{${point.toString(16)}}`;
}

/**
 * `text` as jobrt shows text it did not write (a job's path, a user's record) on one line: each
 * character above written as `\xNN` (up to U+00FF) or `\u{N}` (hex), a backslash as `\\`; all else
 * as it is (docs/cli.md, "The node log" and "jobrt ps"). The escapes read as in a JavaScript string.
 */
export function shownText(text: string): string {
  return text.replace(UNSHOWN, escapeOne);
}

/**
 * `text` shown and double-quoted, `"` as `\"`: a value that cannot close its quotes, end its line
 * or hide what follows. The result is a JavaScript string literal of `text`.
 */
export function quotedText(text: string): string {
  return `"${shownText(text).replaceAll('"', '\\"')}"`;
}
