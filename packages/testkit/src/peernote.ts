import { join } from "node:path";
import { it } from "vitest";
import { corePeerRange, execSpecsOf, peerMinimumNotes } from "./peerminimum.js";
import type { SuiteKit } from "./suitekit.js";

/**
 * Not a check (it fails nothing): says when the plugin uses core API newer than the oldest core its
 * peer range admits, once the baseline step has shown what the plugin returns.
 */
export function registerPeerMinimumNote(kit: SuiteKit): void {
  const file = kit.options.packageJson ?? join(process.cwd(), "package.json");
  it(
    "[NOTE] peer.minimum: the peer range on @jobrt/core admits no core older than the API the plugin uses",
    async (ctx) => {
      const range = corePeerRange(file);
      if (range === undefined) ctx.skip(`${file} has no peerDependencies "@jobrt/core" to compare`);
      const notes = peerMinimumNotes(range as string, {
        plugin: kit.plugin,
        // A baseline that fails is its own checks' failure, not this note's.
        specs: execSpecsOf(
          await kit.baseline().then(
            (b) => b.results,
            () => [],
          ),
        ),
      });
      for (const note of notes) {
        console.warn(`@jobrt/testkit: note: ${file}: ${note}`);
        await ctx.annotate(`${file}: ${note}`, "warning");
      }
    },
    kit.timeout,
  );
}
