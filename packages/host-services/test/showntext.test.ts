import { createContext, runInContext } from "node:vm";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { quotedText, shownText } from "../src/index.js";

/** What must never reach a reader raw: Unicode Cc, Cf, Zl, Zp and lone surrogates (Cs). */
const UNSHOWN = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u;

/**
 * From the Unicode Character Database, independent of the regex engine: controls (C0, DEL, C1
 * with the CSI U+009B and NEL U+0085), format characters (soft hyphen, Arabic marks, zero-width
 * ones, the bidi embeddings, overrides and isolates, BOM, interlinear annotation, musical and tag
 * characters), the separators, and lone surrogates.
 */
const MUST_ESCAPE: [string, string][] = [
  ["\u0000", "\\x00"],
  ["\u0007", "\\x07"],
  ["\t", "\\x09"],
  ["\n", "\\x0a"],
  ["\r", "\\x0d"],
  ["\u001b", "\\x1b"],
  ["\u001f", "\\x1f"],
  ["\u007f", "\\x7f"],
  ["\u0080", "\\x80"],
  ["\u0085", "\\x85"],
  ["\u009b", "\\x9b"],
  ["\u009f", "\\x9f"],
  ["\u00ad", "\\xad"],
  ["\u0600", "\\u{600}"],
  ["\u061c", "\\u{61c}"],
  ["\u180e", "\\u{180e}"],
  ["\u200b", "\\u{200b}"],
  ["\u200d", "\\u{200d}"],
  ["\u200e", "\\u{200e}"],
  ["\u200f", "\\u{200f}"],
  ["\u2028", "\\u{2028}"],
  ["\u2029", "\\u{2029}"],
  ["\u202a", "\\u{202a}"],
  ["\u202d", "\\u{202d}"],
  ["\u202e", "\\u{202e}"],
  ["\u2060", "\\u{2060}"],
  ["\u2066", "\\u{2066}"],
  ["\u2069", "\\u{2069}"],
  ["\ufeff", "\\u{feff}"],
  ["\ufff9", "\\u{fff9}"],
  ["\ufffb", "\\u{fffb}"],
  ["\u{110bd}", "\\u{110bd}"],
  ["\u{1d173}", "\\u{1d173}"],
  ["\u{e0001}", "\\u{e0001}"],
  ["\u{e007f}", "\\u{e007f}"],
  ["\ud800", "\\u{d800}"],
  ["\udcff", "\\u{dcff}"],
  ["\\", "\\\\"],
];

/** Text that shows as itself: letters, marks, other spaces, symbols, private use, a real pair. */
const SHOWN = [
  "a",
  "Z",
  "0",
  " ",
  '"',
  "'",
  "$",
  "é",
  "\u00a0",
  "\u00ff",
  "\u0301",
  "\u3000",
  "\ufffd",
  "\ue000",
  "😀",
  "\u{10ffff}",
];

/** Strings rich in what must be escaped, and in quotes and backslashes, as well as any code points. */
const hostile = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc
    .array(fc.constantFrom(...MUST_ESCAPE.map(([c]) => c), ...SHOWN, "x", "\\x41", "\\u{41}"), { maxLength: 30 })
    .map((a) => a.join("")),
);

describe("shownText and quotedText: text jobrt did not write, shown on one line", () => {
  it("escapes each control, format character, separator, lone surrogate and the backslash, as \\xNN up to U+00FF and \\u{N} above", () => {
    for (const [c, escaped] of MUST_ESCAPE) {
      expect(shownText(c)).toBe(escaped);
      expect(shownText(`a${c}b`)).toBe(`a${escaped}b`);
    }
    for (const c of SHOWN) expect(shownText(c)).toBe(c);
    expect(quotedText('say "hi"\\')).toBe('"say \\"hi\\"\\\\"');
  });

  it("over every code point: a character is itself, or escaped exactly when it is Cc, Cf, Cs, Zl, Zp or the backslash", () => {
    const misses: string[] = [];
    for (let point = 0; point <= 0x10ffff; point++) {
      const c = String.fromCodePoint(point);
      const escapes = UNSHOWN.test(c) || c === "\\";
      const want = !escapes
        ? c
        : c === "\\"
          ? "\\\\"
          : point <= 0xff
            ? `\\x${point.toString(16).padStart(2, "0")}`
            : `\\u{${point.toString(16)}}`;
      if (shownText(c) !== want) misses.push(point.toString(16));
    }
    expect(misses).toEqual([]);
  });

  it("the shown text holds none of them, and a quoted value is one JavaScript string literal that gives the text back", () => {
    const context = createContext({});
    fc.assert(
      fc.property(hostile, (s) => {
        const shown = shownText(s);
        expect(shown).not.toMatch(UNSHOWN);
        const quoted = quotedText(s);
        // A reader that takes `"` up to the first unescaped `"` takes the whole value.
        expect(quoted).toMatch(/^"(?:[^"\\]|\\.)*"$/su);
        expect(runInContext(quoted, context)).toBe(s);
      }),
      { numRuns: 1000 },
    );
  });
});
