import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  importedPackages,
  parseNpmSpecifier,
  stripComments,
} from "./_specifiers.ts";

describe("importedPackages()", () => {
  it("importedPackages() finds static, re-export, side-effect and dynamic imports", () => {
    const source = [
      'import { Device } from "@allot/core";',
      'export * from "@allot/cpu/extra";',
      'import "side-effect";',
      'const m = await import("ndarray/lib/x.js");',
      'export { a } from "./local.js";',
      'import fs from "node:fs";',
      'import type { T } from "@webgpu/types";',
    ].join("\n");
    assert.deepEqual(
      [...importedPackages(source)].sort(),
      ["@allot/core", "@allot/cpu", "@webgpu/types", "ndarray", "side-effect"],
    );
  });

  it("importedPackages() ignores specifiers inside comments", () => {
    const source = [
      "/**",
      ' * import { x } from "in-a-doc-example";',
      " */",
      '// import "in-a-line-comment";',
      'import { y } from "real";',
    ].join("\n");
    assert.deepEqual([...importedPackages(source)], ["real"]);
  });

  it("importedPackages() ignores the keywords inside strings and member names", () => {
    const source = [
      'for (const k of ["usage", "from"]) {',
      '  if (typeof o[k] !== "string") x.import("a");',
      "}",
      'const m = { from: "not-a-package" }; y.require("b");',
      'import{z}from"real";',
    ].join("\n");
    assert.deepEqual([...importedPackages(source)], ["real"]);
  });
});

describe("stripComments()", () => {
  it("stripComments() keeps code and drops block and line comments", () => {
    assert.equal(
      stripComments("a /* b */ c\n  // d\ne").replace(/\s+/g, " ").trim(),
      "a c e",
    );
  });
});

describe("parseNpmSpecifier()", () => {
  it("parseNpmSpecifier() splits scoped and plain names, versions and subpaths", () => {
    assert.deepEqual(parseNpmSpecifier("npm:ndarray@1.1.1"), {
      name: "ndarray",
      version: "1.1.1",
    });
    assert.deepEqual(parseNpmSpecifier("npm:@thi.ng/malloc@6.1.150/sub"), {
      name: "@thi.ng/malloc",
      version: "6.1.150",
    });
  });

  it("parseNpmSpecifier() refuses specifiers without a version or not from npm", () => {
    assert.equal(parseNpmSpecifier("npm:ndarray"), undefined);
    assert.equal(parseNpmSpecifier("jsr:@std/assert@1"), undefined);
    assert.equal(parseNpmSpecifier("./mod.ts"), undefined);
  });
});
