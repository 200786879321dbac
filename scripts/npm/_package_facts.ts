/**
 * Facts about built npm files that `build.ts` checks or records, read from
 * TypeScript's syntax tree:
 *
 * - {@linkcode anyLeaks}: where a `.d.ts` says `any` (`deno pack`'s
 *   declaration emitter writes `any` for a declaration whose type it cannot
 *   see without inference, such as `x = -1` or `A = 0x1 | 0x2`; an npm user
 *   then gets no type checking there);
 * - {@linkcode sideEffectStatements}: top-level statements of a module that
 *   do something when it is imported (they must be listed in the package's
 *   `sideEffects`, or a bundler may drop the module).
 *
 * @module
 */

import type { TypeScriptApi } from "./_computed_members.ts";

interface Node {
  kind: number;
  getStart(file?: unknown): number;
  getText(file?: unknown): string;
  forEachChild<T>(visit: (node: Node) => T | undefined): T | undefined;
}

interface SourceFile extends Node {
  text: string;
  statements: Node[];
  getLineAndCharacterOfPosition(pos: number): { line: number };
}

function parse(ts: TypeScriptApi, name: string, text: string): SourceFile {
  return ts.createSourceFile(name, text, ts.ScriptTarget.ESNext, true) as
    & SourceFile
    & ReturnType<TypeScriptApi["createSourceFile"]>;
}

/**
 * Every `any` type in a declaration file, as `line N: text of the line`.
 *
 * @param ts The TypeScript compiler API.
 * @param name The file name (for the parser).
 * @param text The `.d.ts` text.
 * @returns One entry per `any`, in order.
 */
export function anyLeaks(
  ts: TypeScriptApi,
  name: string,
  text: string,
): string[] {
  const file = parse(ts, name, text);
  const found: string[] = [];
  const visit = (node: Node): void => {
    if (node.kind === ts.SyntaxKind.AnyKeyword) {
      const { line } = file.getLineAndCharacterOfPosition(node.getStart(file));
      const row = text.split("\n")[line].replace(/^.*\*\/\s*/, "").trim();
      found.push(`line ${line + 1}: ${row}`);
    }
    node.forEachChild(visit);
  };
  visit(file);
  return found;
}

/**
 * The top-level statements of an ES module that act when it is imported:
 * anything but imports, exports, declarations (whose initializers are taken
 * as pure), `"use strict"` and the `_computedKey = ...` / `_a = ...`
 * assignments TypeScript emits for computed class members.
 *
 * @param ts The TypeScript compiler API.
 * @param name The file name (for the parser).
 * @param text The JavaScript text.
 * @returns The statements' first lines.
 */
export function sideEffectStatements(
  ts: TypeScriptApi,
  name: string,
  text: string,
): string[] {
  const k = ts.SyntaxKind;
  const quiet = new Set([
    k.ImportDeclaration,
    k.ExportDeclaration,
    k.ExportAssignment,
    k.FunctionDeclaration,
    k.ClassDeclaration,
    k.VariableStatement,
    k.EmptyStatement,
    k.InterfaceDeclaration,
    k.TypeAliasDeclaration,
  ]);
  const file = parse(ts, name, text);
  const found: string[] = [];
  for (const statement of file.statements) {
    if (quiet.has(statement.kind)) continue;
    const line = statement.getText(file).split("\n")[0].trim();
    if (
      statement.kind === k.ExpressionStatement &&
      /^(["']use strict["'];?|_(computedKey\d*|[a-z])\s*=\s*[\w.]+;?)$/.test(
        line,
      )
    ) continue;
    found.push(line);
  }
  return found;
}
