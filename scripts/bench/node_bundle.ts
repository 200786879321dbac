/**
 * Bundles a bench's Node entry point with `deno bundle`, for the benches that
 * run their head-to-head under Node too (`packages/cpu/bench/run.ts`,
 * `real_traces.ts`, `packages/buddy/bench/run.ts`).
 *
 * @module
 */

/**
 * Bundles `entry` into one ES module at `out`.
 *
 * @param entry The entry point (a `file:` URL).
 * @param out Where the bundle goes.
 * @returns `undefined` when it was made, else why not (`deno bundle`'s
 * message), for the bench to print in place of the Node rows.
 */
export async function bundleForNode(
  entry: URL,
  out: string,
): Promise<string | undefined> {
  const built = await new Deno.Command(Deno.execPath(), {
    args: ["bundle", "--quiet", entry.pathname, "-o", out],
    stderr: "piped",
  }).output();
  return built.success
    ? undefined
    : `deno bundle failed: ${new TextDecoder().decode(built.stderr)}`;
}
