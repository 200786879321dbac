import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { modelRuns } from "./_test_faults.ts";
import {
  IntrusivePtr,
  IntrusiveTarget,
  WeakIntrusivePtr,
} from "./intrusive_ptr.ts";
import {
  DoubleFreeError,
  InvalidArgumentError,
  UseAfterFreeError,
} from "./errors.ts";

class Counted extends IntrusiveTarget {
  released = 0;
  protected override releaseResources(): void {
    this.released++;
  }
}

describe("IntrusivePtr", () => {
  it("IntrusivePtr.make() starts at strong 1, weak 1", () => {
    const p = IntrusivePtr.make(new Counted());
    assert.equal(p.useCount, 1);
    assert.equal(p.weakUseCount, 1);
    assert.ok(p.isUnique);
  });

  it("IntrusivePtr.make() refuses a target that is already owned", () => {
    const t = new Counted();
    IntrusivePtr.make(t);
    assert.throws(() => IntrusivePtr.make(t), InvalidArgumentError);
  });

  it("IntrusivePtr.release() twice throws DoubleFreeError", () => {
    const p = IntrusivePtr.make(new Counted());
    p.release();
    assert.throws(() => p.release(), DoubleFreeError);
    assert.throws(() => p.target, UseAfterFreeError);
    assert.throws(() => p.clone(), UseAfterFreeError);
  });

  it("IntrusivePtr.retain() throws once the strong count reached zero", () => {
    const t = new Counted();
    IntrusivePtr.make(t).release();
    assert.throws(() => IntrusivePtr.retain(t), UseAfterFreeError);
    assert.equal(t.useCount, 0);
    assert.equal(t.released, 1);
  });

  it("IntrusiveTarget runs releaseResources() once even if it throws", () => {
    class Throws extends IntrusiveTarget {
      calls = 0;
      protected override releaseResources(): void {
        this.calls++;
        throw new Error("boom");
      }
    }
    const t = new Throws();
    const weak = IntrusivePtr.make(t);
    const w = weak.weak();
    assert.throws(() => weak.release(), /boom/);
    assert.equal(t.calls, 1);
    assert.equal(t.weakUseCount, 1);
    w.release();
    assert.ok(t.finished);
  });

  it("WeakIntrusivePtr.of() refuses a target with no owners", () => {
    assert.throws(() => WeakIntrusivePtr.of(new Counted()), UseAfterFreeError);
  });

  it("matches a reference model under random retain/release/weak/lock/dispose", () => {
    type Op =
      | { k: "clone"; i: number }
      | { k: "release"; i: number }
      | { k: "dispose"; i: number }
      | { k: "weak"; i: number }
      | { k: "lock"; i: number }
      | { k: "weakClone"; i: number }
      | { k: "weakRelease"; i: number };
    const idx = fc.nat(7);
    const op: fc.Arbitrary<Op> = fc.oneof(
      ...([
        "clone",
        "release",
        "dispose",
        "weak",
        "lock",
        "weakClone",
        "weakRelease",
      ] as const)
        .map((k) => idx.map((i) => ({ k, i }) as Op)),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const t = new Counted();
        const strong: IntrusivePtr<Counted>[] = [IntrusivePtr.make(t)];
        const strongLive: boolean[] = [true];
        const weak: WeakIntrusivePtr<Counted>[] = [];
        const weakLive: boolean[] = [];
        let s = 1;
        let w = 0; // weak handles alive
        let everZero = false;
        for (const o of ops) {
          const pickS = strong.length ? o.i % strong.length : -1;
          const pickW = weak.length ? o.i % weak.length : -1;
          switch (o.k) {
            case "clone":
            case "weak":
              if (pickS < 0) break;
              if (!strongLive[pickS]) {
                assert.throws(
                  () =>
                    o.k === "clone"
                      ? strong[pickS].clone()
                      : strong[pickS].weak(),
                  UseAfterFreeError,
                );
              } else if (o.k === "clone") {
                strong.push(strong[pickS].clone());
                strongLive.push(true);
                s++;
              } else {
                weak.push(strong[pickS].weak());
                weakLive.push(true);
                w++;
              }
              break;
            case "release":
            case "dispose":
              if (pickS < 0) break;
              if (!strongLive[pickS]) {
                if (o.k === "release") {
                  assert.throws(() => strong[pickS].release(), DoubleFreeError);
                } else strong[pickS][Symbol.dispose]();
              } else {
                if (o.k === "release") strong[pickS].release();
                else strong[pickS][Symbol.dispose]();
                strongLive[pickS] = false;
                s--;
                if (s === 0) everZero = true;
              }
              break;
            case "lock":
            case "weakClone":
              if (pickW < 0) break;
              if (!weakLive[pickW]) {
                assert.throws(
                  () =>
                    o.k === "lock" ? weak[pickW].lock() : weak[pickW].clone(),
                  UseAfterFreeError,
                );
              } else if (o.k === "lock") {
                const got = weak[pickW].lock();
                if (s === 0) assert.equal(got, undefined);
                else {
                  assert.ok(got);
                  strong.push(got);
                  strongLive.push(true);
                  s++;
                }
              } else {
                weak.push(weak[pickW].clone());
                weakLive.push(true);
                w++;
              }
              break;
            case "weakRelease":
              if (pickW < 0) break;
              if (!weakLive[pickW]) {
                assert.throws(() => weak[pickW].release(), DoubleFreeError);
              } else {
                weak[pickW].release();
                weakLive[pickW] = false;
                w--;
              }
              break;
          }
          assert.equal(t.useCount, s);
          assert.equal(t.weakUseCount, w + (s > 0 ? 1 : 0));
          assert.equal(t.released, everZero ? 1 : 0);
          assert.equal(t.finished, everZero && w === 0);
          if (everZero) assert.equal(s, 0, "strong count rose after zero");
        }
      }),
      { numRuns: modelRuns() },
    );
  });
});
