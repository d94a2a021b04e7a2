import { describe, expect, it } from "vitest";
import { parseSize } from "../src/index.js";

const K = 1024;

describe("parseSize: one size grammar for every conf file", () => {
  it.each([
    // what images.conf took (CacheSize, SharedStoreSize)
    ["20G", 20 * K ** 3],
    ["512M", 512 * K ** 2],
    ["1.5M", 1.5 * K ** 2],
    ["1.5T", 1.5 * K ** 4],
    ["4096", 4096],
    ["20GiB", 20 * K ** 3],
    ["20GB", 20 * K ** 3],
    ["20Ki", 20 * K],
    ["4096B", 4096],
    ["10 G", 10 * K ** 3],
    [" 20g ", 20 * K ** 3],
    ["1.7", 1],
    // what shifter.conf took (MaxPerNodeCache, perNodeCache size=)
    ["100", 100],
    ["100b", 100],
    ["10k", 10 * K],
    ["10m", 10 * K ** 2],
    ["10g", 10 * K ** 3],
    ["10t", 10 * K ** 4],
    ["2p", 2 * K ** 5],
    ["1e", K ** 6],
    ["0", 0],
  ])("%j is %d bytes", (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each(["", "big", "G", "-1", "1,5G", "1.G", ".5G", "10x", "10GG", "10iB", "10 G B", "1e3", "0x10", "10bb"])(
    "%j is not a size",
    (text) => expect(parseSize(text)).toBeUndefined(),
  );
});
