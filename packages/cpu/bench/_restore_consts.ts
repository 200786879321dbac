/**
 * The Node side of the cpu benchmark runs a `deno bundle` of
 * `node_main.ts`; see {@linkcode restoreConsts} for why its constants are
 * put back as `const`.
 *
 * @module
 */

// `deno bundle` (esbuild) writes every top-level `const` of the bundled
// modules as `var`. Node 20's optimizing compiler folds a module's `const`
// into the code but must load a `var` from memory at each use, so the heap's
// named constants (record slots, class bits) each cost a load, a tag check
// and an untag there: about 0.8x the speed of the same code with `const`
// (README, "Where the time goes"). The npm build keeps `const`, so this puts
// back `const` on the bundle's top-level numeric constants (never assigned
// again: a `const` would throw at the first assignment) to time what npm
// users run.
/**
 * Puts `const` back on a bundle's top-level upper-case numeric constants.
 *
 * @param bundle The text of an ES module bundle.
 * @returns The same text with those `var`s written as `const`.
 */
export function restoreConsts(bundle: string): string {
  return bundle.replace(
    /^var ([A-Z][A-Z0-9_]*) = ([-+*\/<>()~&|^ \w.]+);$/gm,
    (line, name: string, value: string) =>
      // Numbers and other upper-case constants only.
      /[a-z]/.test(value.replace(/0x[\da-f]+/gi, ""))
        ? line
        : `const ${name} = ${value};`,
  );
}
