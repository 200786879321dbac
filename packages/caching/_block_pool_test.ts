import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { _Block, _BlockPool, _Segment } from "./_block_pool.ts";

function key(b: _Block<unknown>): [number, number, number] {
  return [b.streamId, b.size, b.address];
}
function compare(x: _Block<unknown>, y: _Block<unknown>): number {
  return x.streamId - y.streamId || x.size - y.size || x.address - y.address;
}

describe("_BlockPool", () => {
  it("_BlockPool keeps (stream, size, address) order through inserts, removals and in-place re-keys, and finds the lower bound", () => {
    const segment = new _Segment<unknown>(
      1,
      0,
      {
        memory: null,
        byteOffset: 0,
        byteLength: 1,
      },
      1,
      true,
      {
        id: 0,
        fence: () => ({ completed: true, wait: () => Promise.resolve() }),
      },
    );
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            insert: fc.boolean(),
            resize: fc.boolean(),
            stream: fc.integer({ min: 0, max: 2 }),
            size: fc.integer({ min: 1, max: 40 }),
            pick: fc.nat(),
          }),
          { minLength: 1, maxLength: 600 },
        ),
        (ops) => {
          const pool = new _BlockPool<unknown>(true);
          const model: _Block<unknown>[] = [];
          let address = 0;
          for (const op of ops) {
            if (op.insert || model.length === 0) {
              const b = new _Block<unknown>(segment);
              b.streamId = op.stream;
              b.size = op.size * 512;
              b.address = address++ * 512;
              pool.insert(b);
              model.push(b);
            } else if (op.resize) {
              // Change a block's size in place, as split and merge do.
              const b = model[op.pick % model.length];
              const at = pool.indexOf(b);
              b.size = op.size * 512;
              pool.rekeyAt(at);
            } else {
              const [b] = model.splice(op.pick % model.length, 1);
              assert.ok(pool.has(b));
              pool.remove(b);
              assert.ok(!pool.has(b));
            }
            model.sort(compare);
            assert.equal(pool.count, model.length);
            assert.deepEqual(pool.all().map(key), model.map(key));
            const want = model.find((b) =>
              b.streamId > op.stream ||
              (b.streamId === op.stream && b.size >= op.size * 512)
            );
            assert.equal(pool.lowerBound(op.stream, op.size * 512), want);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it("_BlockPool.remove() refuses a block it does not hold", () => {
    const pool = new _BlockPool<unknown>(false);
    const segment = new _Segment<unknown>(
      1,
      0,
      {
        memory: null,
        byteOffset: 0,
        byteLength: 1,
      },
      1,
      false,
      {
        id: 0,
        fence: () => ({ completed: true, wait: () => Promise.resolve() }),
      },
    );
    assert.throws(() => pool.remove(new _Block(segment)), /not in its pool/);
  });
});
