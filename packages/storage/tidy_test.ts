import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { modelRuns } from "../core/_test_faults.ts";
import { InvalidArgumentError } from "@allot/core";
import { Buffer } from "./buffer.ts";
import { DynBuffer } from "./dyn_buffer.ts";
import { type BufferOwner, keep, ownedBuffers, tidy } from "./tidy.ts";

/** One step of a program run inside a scope. */
type Op =
  | { kind: "view" }
  | { kind: "release"; pick: number }
  | { kind: "keep"; pick: number }
  | { kind: "wrap"; pick: number }
  | { kind: "nest"; body: Op[]; ret: number[]; throws: boolean };

const opArb: fc.Arbitrary<Op[]> = fc.letrec<{ ops: Op[]; op: Op }>((tie) => ({
  op: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant({ kind: "view" as const }),
    fc.record({ kind: fc.constant("release" as const), pick: fc.nat() }),
    fc.record({ kind: fc.constant("keep" as const), pick: fc.nat() }),
    fc.record({ kind: fc.constant("wrap" as const), pick: fc.nat() }),
    fc.record({
      kind: fc.constant("nest" as const),
      body: tie("ops") as fc.Arbitrary<Op[]>,
      ret: fc.array(fc.nat(), { maxLength: 3 }),
      throws: fc.boolean(),
    }),
  ),
  ops: fc.array(tie("op") as fc.Arbitrary<Op>, { maxLength: 8 }),
})).ops;

type Handle = Buffer<"f32"> | DynBuffer;

/** An owning handle and what the model expects of it. */
interface Entity {
  handle: Handle;
  /** Expected: released by someone. */
  released: boolean;
}

class Boom extends Error {}

describe("tidy", () => {
  it("tidy() releases exactly what a model of nested scopes says, and keeps what is returned or kept", () => {
    fc.assert(
      fc.property(
        opArb,
        fc.array(fc.nat(), { maxLength: 3 }),
        fc.nat(2),
        (program, ret, container) => {
          using m = Buffer.zeros("f32", [2, 3]);
          const all: Entity[] = [];
          // runs `ops` inside the current scope; returns the entities the
          // model holds in this scope at the end (the scope's set)
          const run = (ops: Op[]): Entity[] => {
            const mine: Entity[] = [];
            const live = () => mine.filter((e) => !e.released);
            const pick = (n: number) => {
              const l = live();
              return l.length === 0 ? undefined : l[n % l.length];
            };
            for (const op of ops) {
              if (op.kind === "view") {
                const e = { handle: m.transpose(), released: false };
                all.push(e);
                mine.push(e);
              } else if (op.kind === "release") {
                const e = pick(op.pick);
                if (e) {
                  e.handle.release();
                  e.released = true;
                }
              } else if (op.kind === "keep") {
                const e = pick(op.pick);
                if (e) {
                  keep(e.handle);
                  mine.splice(mine.indexOf(e), 1); // owned by the test now
                }
              } else if (op.kind === "wrap") {
                const e = pick(op.pick);
                if (e && e.handle instanceof Buffer) {
                  e.handle = new DynBuffer(e.handle);
                }
              } else {
                let inner: Entity[] = [];
                let returned: Entity[] = [];
                try {
                  tidy(() => {
                    inner = run(op.body);
                    const l = inner.filter((e) => !e.released);
                    returned = [
                      ...new Set(
                        op.ret.flatMap((r) =>
                          l.length ? [l[r % l.length]] : []
                        ),
                      ),
                    ];
                    if (op.throws) throw new Boom();
                    return returned.map((e) => ({ nested: [e.handle] }));
                  });
                } catch (error) {
                  if (!(error instanceof Boom)) throw error;
                  returned = [];
                }
                // the nested scope released what it held but returned
                for (const e of inner) {
                  if (!returned.includes(e)) e.released = true;
                }
                mine.push(...returned); // returned ones move to this scope
              }
            }
            return mine;
          };
          let top: Entity[] = [];
          let out: Entity[] = [];
          tidy(() => {
            top = run(program);
            const l = top.filter((e) => !e.released);
            out = [
              ...new Set(ret.flatMap((r) => l.length ? [l[r % l.length]] : [])),
            ];
            const handles = out.map((e) => e.handle);
            return container === 0
              ? handles
              : container === 1
              ? { handles }
              : handles[0];
          });
          if (container === 2) out = out.slice(0, 1);
          for (const e of top) if (!out.includes(e)) e.released = true;
          // every handle as the model says; the storage counts the live ones
          for (const e of all) {
            assert.equal(e.handle.released, e.released);
          }
          const live = all.filter((e) => !e.released);
          assert.equal(m.storage.useCount, 1 + live.length);
          for (const e of live) e.handle.release();
          assert.equal(m.storage.useCount, 1);
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("tidy() releases everything made when the function throws, and rethrows", () => {
    using m = Buffer.zeros("f32", [4]);
    let views: Buffer<"f32">[] = [];
    assert.throws(
      () =>
        tidy(() => {
          views = [m.reshape([2, 2]), m.reshape([4, 1])];
          throw new Boom("inside");
        }),
      Boom,
    );
    assert.ok(views.every((v) => v.released));
    assert.ok(m.isStorageUnique);
  });

  it("tidy() refuses a non-function and an async function, releasing what it made", async () => {
    using m = Buffer.zeros("f32", [4]);
    assert.throws(
      () => tidy(42 as unknown as () => void),
      (e: unknown) =>
        e instanceof InvalidArgumentError && /got number/.test(e.message),
    );
    let view: Buffer<"f32"> | undefined;
    assert.throws(
      () =>
        tidy(() => {
          view = m.reshape([2, 2]);
          return Promise.resolve(1);
        }),
      (e: unknown) =>
        e instanceof InvalidArgumentError &&
        /returned a promise/.test(e.message),
    );
    assert.ok(view?.released);
    assert.ok(m.isStorageUnique);
    // the scope closed: later buffers are the caller's
    await Promise.resolve();
    const after = m.reshape([4]);
    assert.ok(!after.released);
    after.release();
  });

  it("keep() refuses what is not a handle; buffers made outside any scope are untouched", () => {
    assert.throws(
      () => keep({} as unknown as Buffer),
      (e: unknown) =>
        e instanceof InvalidArgumentError && /got Object/.test(e.message),
    );
    using m = Buffer.zeros("f32", [4]);
    const outside = m.reshape([2, 2]);
    tidy(() => outside.reshape([4]).release());
    assert.ok(!outside.released);
    outside.release();
  });

  it("tidy() keeps the buffers of a returned wrapper class (the BufferOwner protocol)", () => {
    class Tensor implements BufferOwner {
      constructor(readonly buffer: Buffer<"f32">) {}
      [ownedBuffers](): Buffer<"f32">[] {
        return [this.buffer];
      }
    }
    class Layer implements BufferOwner {
      constructor(readonly weight: Tensor, readonly bias: Tensor) {}
      *[ownedBuffers](): Iterable<Tensor> {
        yield this.weight;
        yield this.bias;
      }
    }
    using m = Buffer.fromData("f32", [1, 2, 3, 4], { shape: [2, 2] });
    let scratch: Buffer<"f32"> | undefined;
    const layer = tidy(() => {
      scratch = m.transpose();
      const inner = tidy(() => new Tensor(scratch!.contiguous()));
      return new Layer(inner, new Tensor(m.reshape([4])));
    });
    assert.equal(layer.weight.buffer.released, false);
    assert.equal(layer.bias.buffer.released, false);
    assert.deepEqual([...layer.weight.buffer.toData()], [1, 3, 2, 4]);
    assert.ok(scratch?.released);
    // a wrapper inside a Map and a Set is kept too
    const [map, set] = tidy(() =>
      [
        new Map([["t", new Tensor(m.reshape([4, 1]))]]),
        new Set([new Tensor(m.reshape([1, 4]))]),
      ] as const
    );
    assert.equal(map.get("t")!.buffer.released, false);
    assert.equal([...set][0].buffer.released, false);
    // keep(wrapper) keeps what it owns; the rest of the scope is released
    let kept: Tensor | undefined;
    let dropped: Buffer<"f32"> | undefined;
    tidy(() => {
      kept = keep(new Tensor(m.reshape([4])));
      dropped = m.reshape([4]);
    });
    assert.equal(kept!.buffer.released, false);
    assert.ok(dropped!.released);
    for (
      const b of [
        layer.weight.buffer,
        layer.bias.buffer,
        map.get("t")!.buffer,
        [...set][0].buffer,
        kept!.buffer,
      ]
    ) b.release();
    assert.ok(m.isStorageUnique);
  });
});
