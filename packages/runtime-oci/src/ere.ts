/**
 * POSIX extended regular expressions (what Slurm's regcomp(REG_EXTENDED) accepts) as JavaScript
 * RegExps. The two dialects agree on everything oci.conf files use in practice except bracket
 * classes such as `[[:alpha:]]`, which are translated here; anything JavaScript cannot compile is
 * reported to the caller.
 */
const CLASSES: Record<string, string> = {
  alnum: "A-Za-z0-9",
  alpha: "A-Za-z",
  blank: " \\t",
  cntrl: "\\x00-\\x1f\\x7f",
  digit: "0-9",
  graph: "\\x21-\\x7e",
  lower: "a-z",
  print: "\\x20-\\x7e",
  punct: "!-\\/:-@\\[-`{-~",
  space: " \\t\\n\\r\\f\\v",
  upper: "A-Z",
  xdigit: "0-9A-Fa-f",
};

/** Compiles an ERE. Throws an Error saying what is wrong. */
export function compileEre(source: string): RegExp {
  let out = "";
  let i = 0;
  while (i < source.length) {
    const c = source[i] as string;
    if (c === "\\") {
      out += source.slice(i, i + 2);
      i += 2;
      continue;
    }
    if (c !== "[") {
      out += c;
      i++;
      continue;
    }
    // A bracket expression: `]` first (after an optional `^`) is literal, backslash is literal.
    let j = i + 1;
    let body = "";
    if (source[j] === "^") {
      body += "^";
      j++;
    }
    if (source[j] === "]") {
      body += "\\]";
      j++;
    }
    let closed = false;
    while (j < source.length) {
      const d = source[j] as string;
      if (d === "]") {
        closed = true;
        j++;
        break;
      }
      if (d === "[" && source[j + 1] === ":") {
        const end = source.indexOf(":]", j + 2);
        if (end < 0) throw new Error(`unterminated character class at offset ${j}`);
        const name = source.slice(j + 2, end);
        const cls = CLASSES[name];
        if (cls === undefined) throw new Error(`unknown character class [:${name}:]`);
        body += cls;
        j = end + 2;
        continue;
      }
      body += d === "\\" ? "\\\\" : d;
      j++;
    }
    if (!closed) throw new Error(`unterminated bracket expression at offset ${i}`);
    out += `[${body}]`;
    i = j;
  }
  return new RegExp(out);
}
