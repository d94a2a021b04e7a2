import { createHash } from "node:crypto";

// The `jobrt` command as a few files instead of ~50 modules: Node's ESM loader resolves, reads and
// links each module on its own, which was most of `jobrt exec`'s start-up (docs/performance.md,
// "Where the time goes in jobrt exec"). tsc still emits dist/ for the library entry and the types;
// this replaces dist/bin.js and adds dist/bin-<chunk>.js beside it (one directory below
// package.json, where host.ts and packageVersion look for it). @jobrt/core stays a package import:
// runtime plugins import it too and must share its classes (JobrtError, NOT_SUPPORTED) with jobrt.
// The runtime packages stay package imports too: they are the plugins the registry loads by name,
// and runtime-oci finds its helper programs (dist/*-main.js) relative to its own files, as
// @jobrt/images finds its image helper (dist/helpermain.js): it stays a package import.
// yaml is never bundled: the launcher's CDI reader requires it lazily, from the file that holds the
// reader, so the CLI (whose bundle holds the launcher) lists it as a dependency of its own.
const cli = {
  input: { bin: "src/bin.ts" },
  platform: "node",
  external: [/^@jobrt\/core$/, /^@jobrt\/runtime-/, /^@jobrt\/images$/],
  output: {
    dir: "dist",
    format: "esm",
    sourcemap: true,
    chunkFileNames: "bin-[name].js",
    // Each command is a chunk of its own, loaded when it runs; what two or more share is one chunk.
    codeSplitting: { groups: [{ name: "common", minShareCount: 2 }] },
  },
};

// `jobrt run` and `jobrt exec` as one CommonJS script that src/codecache.ts compiles with V8's code
// cache (Node 20 has none for ES modules). It may not import(): a vm.Script cannot without an
// experimental loader, so everything it needs is in it, but @jobrt/core and Node's builtins, which
// the loader hands it. Its sha256, appended last, names its caches. Without comments: every run
// reads the whole source into a string (V8 keeps it for lazy compilation), and the JSDoc was a sixth
// of it, with the only non-ASCII characters, which made it a two-byte string twice the size.
const steps = {
  input: { steps: "src/steps.ts" },
  platform: "node",
  external: [/^@jobrt\/core$/, /^@jobrt\/runtime-/],
  plugins: [
    {
      name: "jobrt-steps-hash",
      renderChunk(code) {
        return { code: `${code}\n// jobrt-steps-hash ${createHash("sha256").update(code).digest("hex")}\n`, map: null };
      },
    },
  ],
  output: { dir: "dist", format: "cjs", sourcemap: true, entryFileNames: "[name].cjs", codeSplitting: false, comments: false },
};

export default [cli, steps];
