import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, it } from "node:test";
import {
  computedMembers,
  restoreComputedMembers,
  type TypeScriptApi,
} from "./_computed_members.ts";
import { ensureTools, toolsDir } from "./_tools.ts";
import { codeBlocks, relevantErrors, usesUsing } from "./_types_check.ts";

// TypeScript comes from tools/npm, which a fresh clone installs on first use.
await ensureTools();
const ts = createRequire(toolsDir)("typescript") as TypeScriptApi;

const source = `
export class Handle {
  /** Frees it. */
  release(): void {}
  /** Same as release(), for \`using\`. */
  [Symbol.dispose](): void {
    this.release();
  }
  override async [Symbol.asyncDispose](): Promise<void> {}
  get [Symbol.toStringTag](): string {
    return "Handle";
  }
  private [Symbol.iterator](): Iterator<number> {
    return [][Symbol.iterator]();
  }
}
class Hidden {
  [Symbol.dispose](): void {}
}
`;

// What deno pack emits: the computed members are gone.
const emitted = `/** A handle. */ export declare class Handle {
  /** Frees it. */ release(): void;
}
`;

describe("restoreComputedMembers()", () => {
  it("puts [Symbol.dispose] and the other public computed members back", () => {
    const members = computedMembers(ts, "handle.ts", source);
    const { text, added } = restoreComputedMembers(
      ts,
      "handle.d.ts",
      emitted,
      members,
    );
    assert.deepEqual(added, [
      "Handle[Symbol.dispose]",
      "Handle[Symbol.asyncDispose]",
      "Handle[Symbol.toStringTag]",
    ]);
    assert.match(
      text,
      /\/\*\* Same as release\(\), for `using`\. \*\/\n\s*\[Symbol\.dispose\]\(\): void;/,
    );
    assert.match(text, /\n\s*\[Symbol\.asyncDispose\]\(\): Promise<void>;/);
    assert.doesNotMatch(text, /override|async |iterator|this\.release/);
    assert.match(text, /get \[Symbol\.toStringTag\]\(\): string;\n\}/);
    // Idempotent: a second pass adds nothing.
    const again = restoreComputedMembers(ts, "handle.d.ts", text, members);
    assert.deepEqual(again.added, []);
    assert.equal(again.text, text);
  });

  it("refuses a computed name the declaration file cannot resolve", () => {
    const members = computedMembers(
      ts,
      "x.ts",
      "const k = Symbol();\nexport class X { [k](): void {} }",
    );
    assert.throws(
      () =>
        restoreComputedMembers(
          ts,
          "x.d.ts",
          "export declare class X {\n}\n",
          members,
        ),
      /X\[k\] names k, which the declaration file does not declare/,
    );
  });
});

describe("the types check's helpers", () => {
  it("finds ts code blocks and their `using` declarations", () => {
    const md = "text\n```ts\nusing a = f();\n```\n```js\nusing b;\n```\n" +
      "```typescript\nconst using = 1;\n```\n";
    const blocks = codeBlocks(md);
    assert.deepEqual(blocks.map((b) => b.line), [2, 8]);
    assert.equal(usesUsing(blocks[0].text), true);
    assert.equal(usesUsing(blocks[1].text), false);
    assert.equal(usesUsing("await using x = open();"), true);
  });

  it("marks ts blocks fenced with `ignore`, as `deno test --doc` reads them", () => {
    const md = "```ts ignore\nf();\n```\n```ts\ng();\n```\n";
    assert.deepEqual(codeBlocks(md).map((b) => b.ignore), [true, false]);
  });

  it("keeps allot's errors and drops the lib.dom/@webgpu/types collision", () => {
    const output = [
      "Command failed",
      "../node_modules/@webgpu/types/dist/index.d.ts(1,1): error TS2403: dup",
      "  continuation of the dup",
      "a.ts(3,7): error TS2850: The initializer of a 'using' declaration",
      "  Type 'X' is missing [Symbol.dispose]",
      "../../tools/npm/node_modules/typescript/lib/lib.dom.d.ts(9,1): error TS6200: x",
    ].join("\n");
    assert.deepEqual(relevantErrors(output), [
      "a.ts(3,7): error TS2850: The initializer of a 'using' declaration",
      "  Type 'X' is missing [Symbol.dispose]",
    ]);
  });
});
