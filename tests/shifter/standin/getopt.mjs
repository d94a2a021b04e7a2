// @ts-check
// Part of the Shifter STAND-IN used by jobrt's tests (not Shifter, not for production).
// glibc getopt_long semantics, as shifter and shifterimg use them: optional arguments only
// attached, unambiguous long prefixes, `--`, and glibc's error messages.

/**
 * @typedef {{name: string, hasArg: "no" | "required" | "optional", val: string}} LongOption
 * @typedef {{opt: string, name?: string, arg: string | null, raw: string}} ParsedOption
 * @typedef {{options: ParsedOption[], rest: string[], error?: string}} GetoptResult
 */

/**
 * @param {string} prog argv[0], used in messages
 * @param {string[]} args arguments after argv[0]
 * @param {string} optstring e.g. "+hnvV:i:e:Ew::m:" ("+": stop at the first non-option)
 * @param {LongOption[]} longopts
 * @returns {GetoptResult}
 */
export function getoptLong(prog, args, optstring, longopts) {
  // biome-ignore lint/suspicious/noUndeclaredEnvVars: glibc reads POSIXLY_CORRECT the same way
  const requireOrder = optstring.startsWith("+") || process.env.POSIXLY_CORRECT !== undefined;
  const spec = optstring.replace(/^[+-]/, "");
  /** @type {Map<string, "no" | "required" | "optional">} */
  const shorts = new Map();
  for (let i = 0; i < spec.length; i++) {
    const c = /** @type {string} */ (spec[i]);
    if (c === ":") continue;
    const kind = spec[i + 1] === ":" ? (spec[i + 2] === ":" ? "optional" : "required") : "no";
    shorts.set(c, kind);
  }
  /** @type {ParsedOption[]} */
  const options = [];
  /** @type {string[]} */
  const nonOptions = [];
  let i = 0;
  while (i < args.length) {
    const arg = /** @type {string} */ (args[i]);
    if (arg === "--") {
      i++;
      break;
    }
    if (!arg.startsWith("-") || arg === "-") {
      if (requireOrder) break;
      nonOptions.push(arg);
      i++;
      continue;
    }
    if (arg.startsWith("--")) {
      const body = arg.slice(2);
      const eq = body.indexOf("=");
      const name = eq < 0 ? body : body.slice(0, eq);
      let found = longopts.find((o) => o.name === name);
      if (!found) {
        const matches = longopts.filter((o) => o.name.startsWith(name));
        const first = matches[0];
        if (first && matches.every((m) => m.hasArg === first.hasArg && m.val === first.val)) found = first;
        else if (matches.length > 1) {
          const list = matches.map((m) => `'--${m.name}'`).join(" ");
          return { options, rest: [], error: `${prog}: option '--${body}' is ambiguous; possibilities: ${list}` };
        }
      }
      if (!found) return { options, rest: [], error: `${prog}: unrecognized option '--${body}'` };
      i++;
      if (eq >= 0) {
        if (found.hasArg === "no")
          return { options, rest: [], error: `${prog}: option '--${found.name}' doesn't allow an argument` };
        options.push({ opt: found.val, name: found.name, arg: body.slice(eq + 1), raw: arg });
      } else if (found.hasArg === "required") {
        if (i >= args.length)
          return { options, rest: [], error: `${prog}: option '--${found.name}' requires an argument` };
        options.push({ opt: found.val, name: found.name, arg: /** @type {string} */ (args[i]), raw: arg });
        i++;
      } else {
        options.push({ opt: found.val, name: found.name, arg: null, raw: arg });
      }
      continue;
    }
    // A cluster of short options: -vE, -i docker:x, -idocker:x, -w/path.
    i++;
    for (let j = 1; j < arg.length; j++) {
      const c = /** @type {string} */ (arg[j]);
      const kind = shorts.get(c);
      if (kind === undefined) return { options, rest: [], error: `${prog}: invalid option -- '${c}'` };
      const attached = arg.slice(j + 1);
      if (kind === "no") {
        options.push({ opt: c, arg: null, raw: `-${c}` });
        continue;
      }
      if (kind === "optional") {
        options.push({ opt: c, arg: attached === "" ? null : attached, raw: arg });
        break;
      }
      if (attached !== "") options.push({ opt: c, arg: attached, raw: arg });
      else {
        if (i >= args.length) return { options, rest: [], error: `${prog}: option requires an argument -- '${c}'` };
        options.push({ opt: c, arg: /** @type {string} */ (args[i]), raw: arg });
        i++;
      }
      break;
    }
  }
  return { options, rest: [...nonOptions, ...args.slice(i)] };
}
