/**
 * A size in a conf file (images.conf `CacheSize`, shifter.conf `MaxPerNodeCache`): bytes, or a
 * number with a power-of-1024 suffix. One grammar for every conf file, the union of what
 * images.conf and shifter.conf took before it was written once: a decimal number (`1.5T`), space
 * before the suffix, Shifter's `b k m g t p e` (any case), and an `iB`/`B` after it (`20GiB`,
 * `20GB`, `4096B`).
 */
const SIZE_RE = /^([0-9]+(?:\.[0-9]+)?)\s*(?:([kmgtpe])i?)?b?$/i;
const POWERS = "kmgtpe";

/** The size in bytes (rounded down; 0 for `0`), or undefined when `text` is not a size. Since core 2.1.0. */
export function parseSize(text: string): number | undefined {
  const m = SIZE_RE.exec(text.trim());
  if (!m) return undefined;
  const power = m[2] === undefined ? 0 : POWERS.indexOf(m[2].toLowerCase()) + 1;
  const n = Math.floor(Number(m[1]) * 1024 ** power);
  return Number.isFinite(n) ? n : undefined;
}
