/**
 * Arguments and environment values are bytes on Linux, not text: srun passes a task `\xff` as the
 * byte 0xff. jobrt carries them in ordinary strings with each byte that is not part of valid UTF-8
 * written as a lone low surrogate U+DC80..U+DCFF (the "surrogateescape" rule of Python and of
 * PEP 383). Valid UTF-8 never decodes to a lone surrogate, so the mapping is lossless both ways, and
 * a string of valid text is its own encoding (docs/writing-a-runtime.md, "Bytes in argv and env").
 */

const ESCAPE_BASE = 0xdc00;
const decoder = new TextDecoder("utf-8", { fatal: true });

/** `bytes` as a string: valid UTF-8 as text, every other byte as U+DC80 + (byte - 0x80). Since core 2.1.0. */
export function decodeBytes(bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch {
    return decodeMixed(bytes);
  }
}

function decodeMixed(bytes: Uint8Array): string {
  let out = "";
  let at = 0;
  while (at < bytes.length) {
    const length = validSequenceAt(bytes, at);
    if (length === 0) {
      out += String.fromCharCode(ESCAPE_BASE + bytes[at]!);
      at += 1;
    } else {
      out += decoder.decode(bytes.subarray(at, at + length));
      at += length;
    }
  }
  return out;
}

/** The length of the valid UTF-8 sequence starting at `at` (RFC 3629: no overlongs, no surrogates), or 0. */
function validSequenceAt(bytes: Uint8Array, at: number): number {
  const b0 = bytes[at]!;
  if (b0 < 0x80) return 1;
  const length = b0 >= 0xc2 && b0 <= 0xdf ? 2 : b0 >= 0xe0 && b0 <= 0xef ? 3 : b0 >= 0xf0 && b0 <= 0xf4 ? 4 : 0;
  if (length === 0 || at + length > bytes.length) return 0;
  for (let i = 1; i < length; i++) if ((bytes[at + i]! & 0xc0) !== 0x80) return 0;
  const b1 = bytes[at + 1]!;
  if (b0 === 0xe0 && b1 < 0xa0) return 0;
  if (b0 === 0xed && b1 >= 0xa0) return 0;
  if (b0 === 0xf0 && b1 < 0x90) return 0;
  if (b0 === 0xf4 && b1 >= 0x90) return 0;
  return length;
}

/** Any code unit U+DC80..U+DCFF: the regex engine scans a step's whole environment far faster than a cold loop. */
const CANDIDATE = /[\uDC80-\uDCFF]/;

/** True when `text` carries at least one byte that is not UTF-8 (a lone U+DC80..U+DCFF). Since core 2.1.0. */
export function carriesRawBytes(text: string): boolean {
  if (!CANDIDATE.test(text)) return false;
  for (let i = nextCandidate(text, 0); i !== -1; i = nextCandidate(text, i + 1))
    if (escapedByteAt(text, i) !== -1) return true;
  return false;
}

function nextCandidate(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xdc80 && c <= 0xdcff) return i;
  }
  return -1;
}

/** The byte a lone low surrogate at `i` stands for, or -1 (none there, or half of a real pair). */
function escapedByteAt(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c < 0xdc80 || c > 0xdcff) return -1;
  const before = i > 0 ? text.charCodeAt(i - 1) : 0;
  if (before >= 0xd800 && before <= 0xdbff) return -1;
  return c - ESCAPE_BASE;
}

/** The bytes `text` stands for: the inverse of decodeBytes. Since core 2.1.0. */
export function encodeBytes(text: string): Buffer {
  if (nextCandidate(text, 0) === -1) return Buffer.from(text, "utf8");
  const parts: Buffer[] = [];
  let start = 0;
  for (let i = nextCandidate(text, 0); i !== -1; i = nextCandidate(text, i + 1)) {
    const byte = escapedByteAt(text, i);
    if (byte === -1) continue;
    parts.push(Buffer.from(text.slice(start, i), "utf8"), Buffer.of(byte));
    start = i + 1;
  }
  parts.push(Buffer.from(text.slice(start), "utf8"));
  return Buffer.concat(parts);
}
