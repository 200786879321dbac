/**
 * Runs a bench's Node side: bundles its entry point with `deno bundle`
 * (`scripts/bench/node_bundle.ts`) into a temporary folder, lets the bench
 * write what the Node side reads beside it, runs `node`, and parses the JSON
 * the Node side prints. One home for the cpu benches (`run.ts`,
 * `real_traces.ts`) and the buddy bench (`packages/buddy/bench/run.ts`).
 *
 * @module
 */

import { bundleForNode } from "../../../scripts/bench/node_bundle.ts";

/** What {@linkcode underNode} runs. */
export interface UnderNodeOptions {
  /** The Node entry point (a `file:` URL). */
  entry: URL;
  /** Prefix of the temporary folder's name. */
  prefix: string;
  /** Rewrites the bundle's text before it runs (default: as bundled). */
  rewrite?: (code: string) => string;
  /**
   * Writes what the Node side reads into `dir` and returns the arguments
   * after the bundle's path.
   */
  args: (dir: string) => Promise<string[]>;
}

/**
 * Bundles, runs under `node` and parses what it printed.
 *
 * @param options The entry point, the folder's prefix, the arguments.
 * @returns The parsed JSON of stdout, or why there is none (no `node`, a
 * failed bundle or run), for the bench to print in place of the Node rows.
 */
export async function underNode<T>(
  options: UnderNodeOptions,
): Promise<T | string> {
  const dir = await Deno.makeTempDir({ prefix: options.prefix });
  try {
    const bundle = `${dir}/node_main.mjs`;
    const failed = await bundleForNode(options.entry, bundle);
    if (failed !== undefined) return failed;
    if (options.rewrite !== undefined) {
      await Deno.writeTextFile(
        bundle,
        options.rewrite(await Deno.readTextFile(bundle)),
      );
    }
    const args = [bundle, ...await options.args(dir)];
    let out;
    try {
      out = await new Deno.Command("node", {
        args,
        stdout: "piped",
        stderr: "piped",
      }).output();
    } catch {
      return "node not found";
    }
    if (!out.success) {
      return `node failed: ${new TextDecoder().decode(out.stderr)}`;
    }
    return JSON.parse(new TextDecoder().decode(out.stdout)) as T;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
