/**
 * Reading import specifiers in built JavaScript and `npm:` specifiers in
 * Deno import maps, for the npm build's dependency list.
 *
 * @module
 */

// A keyword inside a string (`["usage", "from"]`) is not an import: the
// keyword must not follow a quote, a dot or an identifier character.
const specifierPattern =
  /(?<![\w$."'`])(?:from\s*|import\s*\(\s*|import\s+|require\s*\(\s*)["']([^"']+)["']/g;

/**
 * Removes block comments and whole-line `//` comments from JavaScript.
 *
 * @param text Module source.
 * @returns The source without those comments.
 */
export function stripComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

/**
 * The package names a module imports (`import`, `export ... from`, dynamic
 * `import()`, `require()`); relative paths and `node:` builtins left out.
 *
 * @param text Module source (JavaScript or `.d.ts`).
 * @returns Package names, such as `@allot/core` or `ndarray`.
 */
export function importedPackages(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, spec] of stripComments(text).matchAll(specifierPattern)) {
    if (spec.startsWith(".") || spec.startsWith("/")) continue;
    if (spec.startsWith("node:")) continue;
    const parts = spec.split("/");
    names.add(spec.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]);
  }
  return names;
}

/**
 * Splits an `npm:` specifier into name and version.
 *
 * @param value Such as `npm:@thi.ng/malloc@6.1.150/sub`.
 * @returns `{ name, version }`, or `undefined` when it is not `npm:name@version`.
 */
export function parseNpmSpecifier(
  value: string,
): { name: string; version: string } | undefined {
  const match = /^npm:\/?((?:@[^/@]+\/)?[^/@]+)@([^/]+)/.exec(value);
  return match ? { name: match[1], version: match[2] } : undefined;
}
