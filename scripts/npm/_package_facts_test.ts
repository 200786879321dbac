import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, it } from "node:test";
import type { TypeScriptApi } from "./_computed_members.ts";
import {
  anyLeaks,
  sideEffectStatements,
  widenOptionalProperties,
} from "./_package_facts.ts";
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

  it("widenOptionalProperties adds | undefined to optional properties only", () => {
    const dts = [
      "export interface O {",
      "  a?: number;",
      "  b?: number | undefined;",
      "  c?: () => void;",
      "  d: string;",
      "  e?: A | B;",
      "  f?: unknown;",
      "  m?(x?: number): void;",
      "  g?: { h?: boolean };",
      "}",
      "export declare function f(x?: number): void;",
    ].join("\n");
    const { text, widened } = widenOptionalProperties(ts, "o.d.ts", dts);
    assert.equal(widened, 5);
    assert.equal(
      text,
      [
        "export interface O {",
        "  a?: number | undefined;",
        "  b?: number | undefined;",
        "  c?: (() => void) | undefined;",
        "  d: string;",
        "  e?: A | B | undefined;",
        "  f?: unknown;",
        "  m?(x?: number): void;",
        "  g?: { h?: boolean | undefined } | undefined;",
        "}",
        "export declare function f(x?: number): void;",
      ].join("\n"),
    );
  });
});
