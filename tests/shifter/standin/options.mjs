// @ts-check
// Part of the Shifter STAND-IN used by jobrt's tests (not Shifter, not for production).
// shifter's option table (docs/shifter-interface.md 1.1), shared by the stand-in and the tests that read argv back.

/** glibc short options; "+" because shifter sets POSIXLY_CORRECT (stop at the first non-option). */
export const SHIFTER_OPTSTRING = "+hnvV:i:e:Ew::m:";

/** @type {import("./getopt.mjs").LongOption[]} */
export const SHIFTER_LONGOPTS = [
  { name: "help", hasArg: "no", val: "h" },
  { name: "verbose", hasArg: "no", val: "v" },
  { name: "image", hasArg: "required", val: "i" },
  { name: "volume", hasArg: "required", val: "V" },
  { name: "module", hasArg: "required", val: "m" },
  { name: "env", hasArg: "required", val: "e" },
  { name: "env-file", hasArg: "required", val: "F" },
  { name: "clearenv", hasArg: "no", val: "E" },
  { name: "workdir", hasArg: "optional", val: "w" },
  // Long only, and one option to glibc: same flag and value, so "--entr" is not ambiguous.
  { name: "entrypoint", hasArg: "optional", val: "P" },
  { name: "entry", hasArg: "optional", val: "P" },
];
