import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { _copyStrided } from "./_strided_copy.ts";
import { _noteMemory } from "./_wasm_kernels.ts";
import { unravel } from "./_test_model.ts";

const ARRAYS = [Uint8Array, Uint16Array, Int32Array, Float64Array] as const;

/** A random strided source over a dense base: permute, step, broadcast. */
const layoutArb = fc.record({
  shape: fc.array(fc.integer({ min: 1, max: 70 }), {
    minLength: 1,
    maxLength: 4,
  }),
  perm: fc.nat(),
  steps: fc.array(fc.integer({ min: -3, max: 3 }), {
    minLength: 4,
    maxLength: 4,
  }),
  broadcast: fc.nat(15),
  memoryKind: fc.integer({ min: 0, max: 2 }),
  type: fc.nat(3),
}).filter((l) => l.shape.reduce((a, b) => a * b, 1) <= 40000);

describe("_copyStrided", () => {
  it("_copyStrided() matches a naive copy for permuted, stepped and broadcast layouts", () => {
    fc.assert(
      fc.property(layoutArb, (l) => {
        const rank = l.shape.length;
        const baseShape = l.shape;
        const baseStrides = new Array<number>(rank);
        let acc = 1;
        for (let i = rank - 1; i >= 0; i--) {
          baseStrides[i] = acc;
          acc *= baseShape[i];
        }
        const total = acc;
        // view: step each dim, then permute, then broadcast some size-1 dims
        let shape: number[] = [], strides: number[] = [];
        let offset = 0;
        for (let i = 0; i < rank; i++) {
          const step = l.steps[i] === 0 ? 1 : l.steps[i];
          const n = baseShape[i];
          const count = Math.ceil(n / Math.abs(step));
          shape.push(count);
          strides.push(baseStrides[i] * step);
          if (step < 0) offset += (n - 1) * baseStrides[i];
        }
        const axes = shape.map((_, i) => i);
        for (let i = axes.length - 1; i > 0; i--) {
          const j = (l.perm + i * 13) % (i + 1);
          [axes[i], axes[j]] = [axes[j], axes[i]];
        }
        shape = axes.map((a) => shape[a]);
        strides = axes.map((a) => strides[a]);
        for (let i = 0; i < rank; i++) {
          if ((l.broadcast >> i) & 1) {
            shape[i] = Math.min(shape[i] * 2, 80);
            strides[i] = 0;
          }
        }
        const Ctor = ARRAYS[l.type];
        const count = shape.reduce((a, b) => a * b, 1);
        const pad = 3;
        let src: InstanceType<typeof Ctor>, dst: InstanceType<typeof Ctor>;
        if (l.memoryKind > 0) {
          // one memory for both: an ArrayBuffer, or a WebAssembly.Memory
          const bytes = (pad + total + pad + count) * Ctor.BYTES_PER_ELEMENT;
          let buffer: ArrayBuffer;
          if (l.memoryKind === 2) {
            const memory = new WebAssembly.Memory({
              initial: Math.ceil(bytes / 65536) + 1,
            });
            _noteMemory(memory);
            buffer = memory.buffer as ArrayBuffer;
          } else {
            buffer = new ArrayBuffer(bytes);
          }
          src = new Ctor(buffer, pad * Ctor.BYTES_PER_ELEMENT, total);
          dst = new Ctor(
            buffer,
            (pad + total + pad) * Ctor.BYTES_PER_ELEMENT,
            count,
          );
        } else {
          src = new Ctor(total);
          dst = new Ctor(count);
        }
        for (let i = 0; i < total; i++) src[i] = (i * 7 + 1) % 251;
        const dStrides = new Array<number>(shape.length);
        acc = 1;
        for (let i = shape.length - 1; i >= 0; i--) {
          dStrides[i] = acc;
          acc *= shape[i];
        }
        _copyStrided(dst, 0, dStrides, src, offset, strides, shape);
        for (let f = 0; f < count; f++) {
          const idx = unravel(f, shape);
          let at = offset;
          for (let i = 0; i < idx.length; i++) at += idx[i] * strides[i];
          if (dst[f] !== src[at]) {
            assert.fail(
              `element ${f} of shape [${shape}] strides [${strides}]: ${
                dst[f]
              } !== ${src[at]}`,
            );
          }
        }
        // strided destination: write back through the same layout into a copy
        if (!strides.includes(0)) {
          const back = new Ctor(total);
          _copyStrided(back, offset, strides, dst, 0, dStrides, shape);
          for (let f = 0; f < count; f++) {
            const idx = unravel(f, shape);
            let at = offset;
            for (let i = 0; i < idx.length; i++) at += idx[i] * strides[i];
            assert.equal(back[at], src[at]);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it("_copyStrided() transposes 1-, 2-, 4- and 8-byte elements (the WebAssembly path) with ragged edges and chunks", () => {
    const cases: [number[], number[]][] = [
      [[67, 131], [1, 0]],
      [[64, 64], [1, 0]],
      [[5, 1000], [1, 0]],
      [[1000, 5], [1, 0]],
      [[33, 17, 40], [2, 1, 0]],
      [[33, 17, 40], [1, 2, 0]],
      [[9, 70, 70], [0, 2, 1]],
      // several staged chunks of output (256 KiB each), the last one ragged:
      // chunked along the transposed dim, then along an outer dim
      [[333, 301], [1, 0]],
      [[150, 41, 67], [2, 1, 0]],
      [[37, 45, 300], [0, 2, 1]],
    ];
    // [48, 96], [64, 64] and [80, 1040] have 64-byte-aligned destination
    // rows (in place in one memory); most others are staged there
    // [1024, 70]: 4-byte destination rows a page apart, staged a line apart
    // in 32×8 tiles, in two chunks, the 70 rows ragged against the tiles
    cases.push([[48, 96], [1, 0]], [[80, 1040], [1, 0]], [[1024, 70], [1, 0]]);
    const combos = [Int32Array, Float64Array, Uint16Array, Uint8Array].flatMap((
      Ctor,
    ) => [false, true].map((oneMemory) => [Ctor, oneMemory] as const));
    for (const [Ctor, oneMemory] of combos) {
      for (const [base, axes] of cases) {
        const total = base.reduce((a, b) => a * b, 1);
        // one WebAssembly memory for both (the in-place kernels), or two
        // plain arrays (copied into the kernel's memory)
        let memory: WebAssembly.Memory | undefined;
        if (oneMemory) {
          const bytes = (2 * total + 16) * Ctor.BYTES_PER_ELEMENT + 128;
          memory = new WebAssembly.Memory({
            initial: Math.ceil(bytes / 65536),
          });
          _noteMemory(memory);
        }
        const bpe = Ctor.BYTES_PER_ELEMENT;
        const src = memory
          ? new Ctor(memory.buffer as ArrayBuffer, 64, total + 7)
          : new Ctor(total + 7);
        // higher bits folded in, so that 1-byte elements differ beyond 256
        for (let i = 0; i < src.length; i++) {
          src[i] = (i ^ ((i >> 8) * 31)) % 32749;
        }
        const baseStrides = base.map((_, i) =>
          base.slice(i + 1).reduce((a, b) => a * b, 1)
        );
        const shape = axes.map((a) => base[a]);
        const strides = axes.map((a) => baseStrides[a]);
        const dStrides = shape.map((_, i) =>
          shape.slice(i + 1).reduce((a, b) => a * b, 1)
        );
        const dst = memory
          ? new Ctor(
            memory.buffer as ArrayBuffer,
            Math.ceil((64 + (total + 7) * bpe) / 64) * 64,
            total + 2,
          )
          : new Ctor(total + 2);
        _copyStrided(dst, 2, dStrides, src, 7, strides, shape);
        for (let f = 0; f < total; f++) {
          const idx = unravel(f, shape);
          let at = 7;
          for (let i = 0; i < idx.length; i++) at += idx[i] * strides[i];
          if (dst[f + 2] !== src[at]) {
            assert.fail(
              `${Ctor.name} [${base}] axes [${axes}]${
                oneMemory ? " in one memory" : ""
              }: element ${f} is ${dst[f + 2]}, expected ${src[at]}`,
            );
          }
        }
      }
    }
  });
});
