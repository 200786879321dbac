import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "./errors.ts";
import { validateByteLength } from "./validate.ts";
import {
  assertRefused,
  assertRefusesAll,
  hostileHandles,
  hostileNumbers,
  trapObject,
} from "./_test_hostile.ts";

describe("_test_hostile", () => {
  it("assertRefusesAll() passes a validator that refuses every hostile number", () => {
    const report = assertRefusesAll(
      "validateByteLength",
      hostileNumbers().filter((h) => h.name !== "2^53+2"),
      (v) => validateByteLength(v as number, 2 ** 40),
      { error: InvalidArgumentError, snapshot: () => 0 },
    );
    assert.ok(report.calls > 20);
  });

  it("assertRefusesAll() fails on an accepted value, an untyped error and a changed state", () => {
    assert.throws(
      () => assertRefusesAll("noop", hostileNumbers(), () => {}),
      /was accepted/,
    );
    assert.throws(
      () =>
        assertRefusesAll("coerce", hostileNumbers(), (v) => {
          throw new RangeError(`bad ${typeof v}`);
        }),
      /threw/,
    );
    let state = 0;
    assert.throws(
      () =>
        assertRefused("mutate", () => {
          state++;
          validateByteLength(-1);
        }, { snapshot: () => state }),
      /changed state/,
    );
  });

  it("trapObject() throws on any read and hostileHandles() builds its sources", () => {
    assert.throws(() => String(trapObject()));
    const names = hostileHandles({ stale: () => ({}) }).map((h) => h.name);
    assert.ok(names.includes("stale"));
  });
});
