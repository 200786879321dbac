import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, it } from "node:test";
import type { TypeScriptApi } from "./_computed_members.ts";
import { anyLeaks, sideEffectStatements } from "./_package_facts.ts";
import { ensureTools, toolsDir } from "./_tools.ts";

await ensureTools();
const ts = createRequire(toolsDir)("typescript") as TypeScriptApi;

describe("npm package facts", () => {
  it("anyLeaks finds every any type, not the word in comments or names", () => {
    const dts = [
      "/** any WebGPU device */ export interface DeviceLike { anyName: number }",
      "/** bits */ export declare const MAP_USAGE: any;",
      "export declare class B { id: any; f(x: unknown): Promise<any[]>; }",
      "export type Ok = unknown;",
    ].join("\n");
    assert.deepEqual(anyLeaks(ts, "x.d.ts", dts), [
      "line 2: export declare const MAP_USAGE: any;",
      "line 3: export declare class B { id: any; f(x: unknown): Promise<any[]>; }",
      "line 3: export declare class B { id: any; f(x: unknown): Promise<any[]>; }",
    ]);
    assert.deepEqual(anyLeaks(ts, "y.d.ts", "export type T = string;"), []);
  });

  it("sideEffectStatements finds top-level code that runs on import", () => {
    const js = [
      '"use strict";',
      'import { a } from "./a.js";',
      "var _computedKey;",
      "_computedKey = Symbol.dispose;",
      "_a = B;",
      "export const x = new Map();",
      "export function f() { g(); }",
      "class B {}",
      "if (isMain()) {\n  run();\n}",
      "anchors[1].release();",
      "globalThis.y = 1;",
    ].join("\n");
    assert.deepEqual(sideEffectStatements(ts, "x.js", js), [
      "if (isMain()) {",
      "anchors[1].release();",
      "globalThis.y = 1;",
    ]);
  });
});
