import { readFileSync } from "node:fs";
import { describeRuntimeConformance } from "@jobrt/testkit";
import { describe, expect, it } from "vitest";

// docs/writing-a-runtime.md shows a whole wrapper runtime: it is this file, word for word, and
// it passes the testkit, so the page cannot drift from what runs.
const MARK = "<!-- examples/jobrt-runtime-bwrap/test/minimalbwrap.ts -->";
const docs = new URL("../../../docs/writing-a-runtime.md", import.meta.url);
const source = new URL("./minimalbwrap.ts", import.meta.url);

describe("docs/writing-a-runtime.md, a wrapper runtime in under 100 lines", () => {
  it("shows minimalbwrap.ts word for word, under 100 lines", () => {
    const page = readFileSync(docs, "utf8");
    const at = page.indexOf(MARK);
    expect(at, `the page has no ${MARK}`).toBeGreaterThan(0);
    const block = /^```ts\n([\s\S]*?)^```$/m.exec(page.slice(at))?.[1];
    const code = readFileSync(source, "utf8");
    expect(block).toBe(code);
    expect(code.split("\n").length).toBeLessThan(100);
  });
});

describeRuntimeConformance(() => import("./minimalbwrap.js"), {
  title: "the docs' wrapper runtime",
  type: "runtime/bwrap",
  capabilities: { runs: "exec-spec" },
  // A container runtime that declares no pmi-fd or pass-fds and accepts no devices: the host refuses both.
  mpi: {
    pmi2: { cannot: "it declares no pmi-fd or pass-fds capability" },
    pmix: { cannot: "it accepts no devices, the field through which the host's binds reach a runtime" },
  },
});
