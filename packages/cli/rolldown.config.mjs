// The `jobrt` command as a few files instead of ~50 modules: Node's ESM loader resolves, reads and
// links each module on its own, which was most of `jobrt exec`'s start-up (docs/performance.md,
// "Where the time goes in jobrt exec"). tsc still emits dist/ for the library entry and the types;
// this replaces dist/bin.js and adds dist/bin-<chunk>.js beside it (one directory below
// package.json, where host.ts and packageVersion look for it). @jobrt/core stays a package import:
// runtime plugins import it too and must share its classes (JobrtError, NOT_SUPPORTED) with jobrt.
// The runtime packages stay package imports too: they are the plugins the registry loads by name,
// and runtime-oci finds its helper programs (dist/*-main.js) relative to its own files.
export default {
  input: { bin: "src/bin.ts" },
  platform: "node",
  external: [/^@jobrt\/core$/, /^@jobrt\/runtime-/],
  output: {
    dir: "dist",
    format: "esm",
    sourcemap: true,
    chunkFileNames: "bin-[name].js",
    // Each command is a chunk of its own, loaded when it runs; what two or more share is one chunk.
    codeSplitting: { groups: [{ name: "common", minShareCount: 2 }] },
  },
};
