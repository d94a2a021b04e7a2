import { isAbsolute } from "node:path";

// A library package's dist/index.js as one module, built from the package's own sources: Node's
// ESM loader resolves, reads and links each module on its own, and that, not the code, was most of
// what loading runtime-oci cost a step (docs/decisions.md, "A package a step loads is one module").
// Every bare import (@jobrt/core, the other @jobrt packages, Node's builtins) stays an import, so
// the packages a plugin and jobrt share keep one instance each (JobrtError, NOT_SUPPORTED). tsc
// still emits dist/ for the types and for the programs a package runs by path (dist/*main.js).
// Run from the package's dir: `rolldown -c ../../scripts/rolldown-package.mjs`.
export default {
  input: "src/index.ts",
  platform: "node",
  external: (id) => !id.startsWith(".") && !isAbsolute(id),
  output: { file: "dist/index.js", format: "esm", sourcemap: true },
};
