/**
 * Puts back the class members with computed names (`[Symbol.dispose]()`,
 * `[Symbol.iterator]()`, `get [Symbol.toStringTag]()`) that `deno pack`'s
 * declaration emitter leaves out of the `.d.ts` files. Without them every
 * `using` of an allot handle fails `tsc --strict` with TS2850 although the
 * JavaScript has the method.
 *
 * The signatures are copied from the source file (they are annotated: the
 * workspace has no slow types), JSDoc included, and inserted into the class
 * of the same name in the declaration file.
 *
 * @module
 */

/** The parts of a TypeScript syntax node this module reads. */
interface Node {
  kind: number;
  pos: number;
  end: number;
  getStart(file?: SourceFile, includeJsDoc?: boolean): number;
  getText(file?: SourceFile): string;
  forEachChild<T>(visit: (node: Node) => T | undefined): T | undefined;
}

interface SourceFile extends Node {
  text: string;
}

interface Named extends Node {
  name?: Node & { expression?: Node; text?: string };
  members?: Node[];
  body?: Node;
  type?: Node;
  modifiers?: Node[];
}

/** The parts of the TypeScript compiler API this module uses. */
export interface TypeScriptApi {
  createSourceFile(
    fileName: string,
    text: string,
    target: number,
    setParentNodes?: boolean,
  ): SourceFile;
  ScriptTarget: Record<string, number>;
  SyntaxKind: Record<string, number>;
}

interface Restored {
  /** The class that had the member. */
  className: string;
  /** The computed name, such as `Symbol.dispose`. */
  key: string;
  /** The declaration text to insert (JSDoc and signature). */
  text: string;
}

function classes(ts: TypeScriptApi, file: SourceFile): Named[] {
  const found: Named[] = [];
  const visit = (node: Node): undefined => {
    if (node.kind === ts.SyntaxKind.ClassDeclaration) found.push(node);
    node.forEachChild(visit);
    return undefined;
  };
  file.forEachChild(visit);
  return found;
}

function className(node: Named, file: SourceFile): string | undefined {
  return node.name?.getText(file);
}

function computedKey(
  ts: TypeScriptApi,
  member: Named,
  file: SourceFile,
): string | undefined {
  const name = member.name;
  if (!name || name.kind !== ts.SyntaxKind.ComputedPropertyName) {
    return undefined;
  }
  return name.expression?.getText(file).replace(/\s+/g, "");
}

function hasModifier(
  ts: TypeScriptApi,
  member: Named,
  ...kinds: string[]
): boolean {
  return (member.modifiers ?? []).some((m) =>
    kinds.some((k) => m.kind === ts.SyntaxKind[k])
  );
}

/**
 * The members with computed names of every class in a source file, as the
 * declaration text a `.d.ts` needs.
 *
 * @param ts The TypeScript compiler API.
 * @param fileName The source file's name (for diagnostics only).
 * @param source The source text.
 * @returns One entry per public computed member.
 * @throws {Error} When a computed member cannot be declared from its text
 *   (a property without a type annotation).
 */
export function computedMembers(
  ts: TypeScriptApi,
  fileName: string,
  source: string,
): Restored[] {
  const file = ts.createSourceFile(
    fileName,
    source,
    ts.ScriptTarget.ESNext,
    true,
  );
  const restored: Restored[] = [];
  for (const cls of classes(ts, file)) {
    const name = className(cls, file);
    if (!name) continue;
    for (const member of (cls.members ?? []) as Named[]) {
      const key = computedKey(ts, member, file);
      if (key === undefined) continue;
      if (hasModifier(ts, member, "PrivateKeyword")) continue;
      const start = member.getStart(file, true);
      let text: string;
      if (
        member.kind === ts.SyntaxKind.MethodDeclaration ||
        member.kind === ts.SyntaxKind.GetAccessor ||
        member.kind === ts.SyntaxKind.SetAccessor
      ) {
        const end = member.body ? member.body.getStart(file) : member.end;
        text = source.slice(start, end).trimEnd().replace(/;$/, "") + ";";
      } else if (member.kind === ts.SyntaxKind.PropertyDeclaration) {
        if (!member.type) {
          throw new Error(
            `${fileName}: ${name}[${key}] needs a type annotation for its declaration`,
          );
        }
        text = source.slice(start, member.type.end) + ";";
      } else {
        continue;
      }
      // Modifiers an ambient declaration may not carry.
      text = text.replace(/^(\s*(?:\/\*\*[\s\S]*?\*\/\s*)?)((?:\w+\s+)*)/, (
        _all,
        doc: string,
        modifiers: string,
      ) => doc + modifiers.replace(/\b(?:override|async|public)\s+/g, ""));
      restored.push({ className: name, key, text });
    }
  }
  return restored;
}

/**
 * Inserts the computed members of the source's classes into the classes of
 * the same name in a declaration file, skipping those already declared.
 *
 * @param ts The TypeScript compiler API.
 * @param fileName The declaration file's name (for diagnostics only).
 * @param declarations The `.d.ts` text.
 * @param members What {@linkcode computedMembers} found in the source.
 * @returns The new `.d.ts` text and the members it gained.
 * @throws {Error} When a member's computed name uses an identifier other
 *   than `Symbol` that the declaration file neither declares nor imports,
 *   or when the class is missing from the declaration file.
 */
export function restoreComputedMembers(
  ts: TypeScriptApi,
  fileName: string,
  declarations: string,
  members: Restored[],
): { text: string; added: string[] } {
  if (members.length === 0) return { text: declarations, added: [] };
  const file = ts.createSourceFile(
    fileName,
    declarations,
    ts.ScriptTarget.ESNext,
    true,
  );
  const byClass = new Map<string, Named>();
  for (const cls of classes(ts, file)) {
    const name = className(cls, file);
    if (name) byClass.set(name, cls);
  }
  const inserts: { at: number; text: string }[] = [];
  const added: string[] = [];
  for (const member of members) {
    const cls = byClass.get(member.className);
    // A class that is not exported has no declaration; nothing to restore.
    if (!cls) continue;
    const declared = ((cls.members ?? []) as Named[]).some((m) =>
      computedKey(ts, m, file) === member.key
    );
    if (declared) continue;
    const root = member.key.split(".")[0];
    if (
      root !== "Symbol" &&
      !new RegExp(`\\b${root}\\b`).test(
        declarations.slice(0, cls.getStart(file)),
      )
    ) {
      throw new Error(
        `${fileName}: ${member.className}[${member.key}] names ${root}, which the declaration file does not declare`,
      );
    }
    inserts.push({ at: cls.end - 1, text: `  ${member.text.trim()}\n` });
    added.push(`${member.className}[${member.key}]`);
  }
  // One insertion per class, members in source order.
  const merged = new Map<number, string>();
  for (const { at, text } of inserts) {
    merged.set(at, (merged.get(at) ?? "") + text);
  }
  let text = declarations;
  for (
    const [at, insert] of [...merged].sort((a, b) => b[0] - a[0])
  ) {
    const before = text.slice(0, at);
    const newline = before.endsWith("\n") ? "" : "\n";
    text = before + newline + insert + text.slice(at);
  }
  return { text, added };
}
