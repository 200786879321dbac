// roundupPower2NextDivision from the outside (review 8): a public entry
// point refuses a size that is not one, or divisions that are not a power of
// two, with InvalidArgumentError naming the value; it returned NaN,
// Infinity or a size below the request (100 with divisions -2 gave 64).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { roundupPower2NextDivision } from "./round_size.ts";

describe("roundupPower2NextDivision (review 8)", () => {
  it("refuses sizes and divisions out of range with InvalidArgumentError", () => {
    const bad: [unknown, unknown, string][] = [
      [-1, 4, "byteLength"],
      [Number.NaN, 4, "byteLength"],
      [1.5, 4, "byteLength"],
      [2 ** 60, 4, "byteLength"],
      ["100", 4, "byteLength"],
      [100, 0, "divisions"],
      [100, -2, "divisions"],
      [100, Number.NaN, "divisions"],
      [100, 1.5, "divisions"],
      [100, 3, "divisions"],
      [100, Infinity, "divisions"],
      [100, "4", "divisions"],
    ];
    for (const [n, d, name] of bad) {
      let caught: unknown;
      try {
        roundupPower2NextDivision(n as number, d as number);
      } catch (e) {
        caught = e;
      }
      assert.ok(
        caught instanceof InvalidArgumentError,
        `(${String(n)}, ${String(d)}): ${String(caught)}`,
      );
      assert.equal(caught.argument, name);
    }
    assert.equal(roundupPower2NextDivision(1153434, 4), 1310720);
    assert.equal(roundupPower2NextDivision(100, 1), 128);
  });
});
