import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { _binOf, _Block, _BlockPool, _Segment } from "./_block_pool.ts";
import { modelRuns } from "../core/_test_faults.ts";

function key(b: _Block<unknown>): [number, number, number] {
  return [b.streamId, b.size, b.address];
}
function compare(x: _Block<unknown>, y: _Block<unknown>): number {
  return x.streamId - y.streamId || x.size - y.size || x.address - y.address;
}

describe("_BlockPool", () => {
  it("_BlockPool keeps (stream, size, address) order through inserts, removals and re-keys, and finds the best fit of a sorted array", () => {
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
            // Granules: the exact bins, the split octaves, and beyond 2^31 B.
            size: fc.oneof(
              fc.integer({ min: 1, max: 40 }),
              fc.integer({ min: 1, max: 1 << 15 }),
              fc.constantFrom(4095, 4096, 4097, 2 ** 22 - 1, 2 ** 22, 2 ** 30),
            ),
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
              const moved = op.pick % 2 === 0;
              pool.resize(
                b,
                op.size * 512,
                moved ? address++ * 512 : b.address,
              );
            } else {
              const [b] = model.splice(op.pick % model.length, 1);
              assert.ok(pool.has(b));
              pool.remove(b);
              assert.ok(!pool.has(b));
            }
            model.sort(compare);
            assert.equal(pool.count, model.length);
            assert.deepEqual(pool.all().map(key), model.map(key));
            // Best fit: the first block of the stream at least this large.
            const want = model.find((b) =>
              b.streamId === op.stream && b.size >= op.size * 512
            );
            assert.equal(pool.lowerBound(op.stream, op.size * 512), want);
          }
        },
      ),
      { numRuns: modelRuns() },
    );
  });

  it("_binOf() never decreases with the size and splits each power of two into 8 bins", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 ** 44 }),
        fc.integer({ min: 0, max: 2 ** 20 }),
        (a, d) => {
          const x = a * 512, y = (a + d) * 512;
          assert.ok(_binOf(x) <= _binOf(y), `${x} ${y}`);
        },
      ),
      { numRuns: modelRuns(2000) },
    );
    // One bin per granule up to 16 KiB, then 8 per power of two, (lo, hi].
    assert.equal(_binOf(512), 0);
    assert.equal(_binOf(16384), 31);
    assert.equal(_binOf(16896), 32);
    for (const k of [21, 31, 32, 40, 52]) {
      const top = 2 ** k, sixteenth = 2 ** (k - 4);
      assert.equal(_binOf(top - sixteenth + 512), _binOf(top), `2^${k}`);
      assert.equal(_binOf(top - sixteenth), _binOf(top) - 1, `2^${k}`);
      assert.equal(_binOf(top + 512), _binOf(top) + 1, `2^${k}`);
    }
  });

  it("_BlockPool.prune() drops the bins of streams that hold no block, keeping the default stream's", () => {
    const pool = new _BlockPool<unknown>(true);
    const segment = new _Segment<unknown>(
      1,
      0,
      { memory: null, byteOffset: 0, byteLength: 1 },
      1,
      true,
      {
        id: 0,
        fence: () => ({ completed: true, wait: () => Promise.resolve() }),
      },
    );
    const blocks = [0, 1, 2].map((stream) => {
      const b = new _Block<unknown>(segment);
      b.streamId = stream;
      b.size = 512;
      b.address = stream * 512;
      pool.insert(b);
      return b;
    });
    assert.equal(pool.streamCount, 3);
    pool.remove(blocks[1]);
    pool.remove(blocks[0]);
    pool.prune();
    assert.equal(pool.streamCount, 2);
    assert.equal(pool.lowerBound(2, 512), blocks[2]);
    assert.equal(pool.lowerBound(1, 512), undefined);
    assert.deepEqual(pool.all(), [blocks[2]]);
    pool.insert(blocks[1]);
    assert.equal(pool.lowerBound(1, 512), blocks[1]);
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
