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

/**
 * Adds `| undefined` to every optional property of an interface or type
 * literal in a declaration file (`x?: T` becomes `x?: T | undefined`), so
 * that users who compile with `exactOptionalPropertyTypes` may pass
 * `{ x: undefined }` (or a value that may be undefined), as every allot
 * entry point accepts: an option that is `undefined` is an option not given.
 * A type that already allows `undefined` is left as it is.
 *
 * @param ts The TypeScript compiler API.
 * @param name The file name (for the parser).
 * @param text The `.d.ts` text.
 * @returns The new text and how many properties changed.
 */
export function widenOptionalProperties(
  ts: TypeScriptApi,
  name: string,
  text: string,
): { text: string; widened: number } {
  const k = ts.SyntaxKind;
  const file = parse(ts, name, text);
  const edits: { at: number; insert: string }[] = [];
  let widened = 0;
  const allowsUndefined = (type: Node & { types?: Node[] }): boolean =>
    type.kind === k.UndefinedKeyword || type.kind === k.AnyKeyword ||
    type.kind === k.UnknownKeyword ||
    (type.kind === k.UnionType &&
      (type.types ?? []).some((t) => allowsUndefined(t)));
  const needsParens = new Set([
    k.FunctionType,
    k.ConstructorType,
    k.ConditionalType,
    k.InferType,
  ]);
  const visit = (node: Node): void => {
    const prop = node as Node & {
      questionToken?: Node;
      type?: Node & { end: number };
    };
    if (
      node.kind === k.PropertySignature && prop.questionToken !== undefined &&
      prop.type !== undefined && !allowsUndefined(prop.type)
    ) {
      const parens = needsParens.has(prop.type.kind);
      if (parens) edits.push({ at: prop.type.getStart(file), insert: "(" });
      edits.push({
        at: prop.type.end,
        insert: `${parens ? ")" : ""} | undefined`,
      });
      widened++;
    }
    node.forEachChild(visit);
  };
  visit(file);
  let out = text;
  for (const edit of edits.sort((a, b) => b.at - a.at)) {
    out = out.slice(0, edit.at) + edit.insert + out.slice(edit.at);
  }
  return { text: out, widened };
}
