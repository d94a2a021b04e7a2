import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { carriesRawBytes, decodeBytes, encodeBytes } from "../src/index.js";

describe("bytes in strings (argv and environment as srun passes them)", () => {
  it("valid UTF-8 is its own text, and carries no raw byte", () => {
    const text = "héllo wörld 😀 \u{10ffff}";
    expect(decodeBytes(Buffer.from(text))).toBe(text);
    expect(carriesRawBytes(text)).toBe(false);
    expect(encodeBytes(text)).toEqual(Buffer.from(text));
  });

  it("a byte that is not UTF-8 becomes a lone U+DC80..U+DCFF and back", () => {
    const bytes = Buffer.from([0x61, 0xff, 0xfe, 0x62, 0xc3, 0x28, 0xed, 0xa0, 0x80]);
    const text = decodeBytes(bytes);
    expect(text).toBe("a\udcff\udcfeb\udcc3(\udced\udca0\udc80");
    expect(carriesRawBytes(text)).toBe(true);
    expect(encodeBytes(text)).toEqual(bytes);
  });

  it("a real surrogate pair is text, not two escaped bytes", () => {
    const text = "\ud83d\udcff"; // 📿: its low half lies in the escape range
    expect(carriesRawBytes(text)).toBe(false);
    expect(encodeBytes(text)).toEqual(Buffer.from(text));
  });

  it("any bytes survive decode then encode", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        expect(encodeBytes(decodeBytes(bytes))).toEqual(Buffer.from(bytes));
      }),
    );
  });
});
