/**
 * Adversarial tests of `@allot/threads` from the public API outward: every
 * entry point of `SharedHeap` and `SharedHeapAllocator` gets the shared
 * hostile-value tables (numbers, objects, foreign, stale and other heaps'
 * handles and descriptors, throwing getters and iterators) and must refuse
 * each value with a typed error, leaving the heap's stats, arenas, live
 * blocks and their bytes as they were.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "@allot/storage";
import {
  type SharedBufferDescriptor,
  SharedHeap,
  SharedHeapAllocator,
  type SharedHeapDescriptor,
} from "./mod.ts";
import {
  type Hostile,
  hostileHandles,
  hostileNumbers,
  hostileNumbersBut,
  hostileObjects,
  hostileObjectsBut,
  HostileTally,
  HostileTrapError,
  throwingGetter,
  trapObject,
} from "../core/_test_hostile.ts";

const MiB = 1 << 20;
const tally = new HostileTally();
const numbers = hostileNumbers();
const objectsBut = hostileObjectsBut;
const numbersBut = hostileNumbersBut;

const { refuse } = tally;

/** A heap with live small and large blocks and a shared buffer, and its state. */
function setup() {
  const heap = SharedHeap.create(4 * MiB);
  const other = SharedHeap.create(4 * MiB); // another heap, same layout
  const allocator = new SharedHeapAllocator(heap);
  const blocks = [heap.alloc(64), heap.alloc(100_000)];
  heap.bytes(blocks[0], 64).fill(7);
  const buffer = Buffer.fromData("i32", [1, 2, 3, 4], { allocator });
  const state = () => ({
    stats: heap.stats(),
    arenas: heap.arenas(),
    held: heap.blocksOf(heap.arena),
    bytes: [...heap.bytes(blocks[0], 64)],
    refs: allocator.refCount(buffer),
    data: [...buffer.toData()],
    open: heap.isOpen,
    integrity: (heap.checkIntegrity(), "ok"),
  });
  return { heap, other, allocator, blocks, buffer, state };
}

describe("@allot/threads adversarial", () => {
  after(() => {
    console.log(
      `threads adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("SharedHeap.create() refuses hostile memories, sizes and options", () => {
    refuse(
      "SharedHeap.create(memory)",
      [
        ...numbersBut("Infinity", "1e308", "2^53", "2^53+2").filter((h) =>
          typeof h.value !== "number" || !(h.value as number > 0)
        ),
        { name: "0", value: 0 },
        { name: "1 (too small)", value: 1 },
        { name: "ArrayBuffer", value: new ArrayBuffer(4 * MiB) },
        {
          name: "non-shared WebAssembly.Memory",
          value: new WebAssembly.Memory({ initial: 64 }),
        },
        { name: "Uint8Array over a SAB", value: new Uint8Array(8) },
        ...objectsBut("undefined", "null", "0", "NaN", "8n"),
      ],
      (v) => SharedHeap.create(v as number),
    );
    refuse(
      "SharedHeap.create(memory) past 2^31",
      numbers.filter((h) => ["Infinity", "1e308", "2^53"].includes(h.name)),
      (v) => SharedHeap.create(v as number),
    );
    const sab = new SharedArrayBuffer(MiB);
    refuse(
      "SharedHeap.create(sab, options)",
      objectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => SharedHeap.create(sab, v as object),
    );
    for (const key of ["byteOffset", "byteLength", "lockTimeoutMs"]) {
      refuse(
        `SharedHeap.create(sab, { ${key} })`,
        numbersBut("undefined", "null", "0.5", "1.5").concat(
          key === "byteOffset"
            ? [{ name: "4 (not a multiple of 8)", value: 4 }, {
              name: "past the memory",
              value: 2 * MiB,
            }]
            : key === "byteLength"
            ? [{ name: "100 (too small)", value: 100 }, {
              name: "past the memory",
              value: 2 * MiB,
            }]
            : [],
        ).filter((h) =>
          // a fractional timeout is a valid number of milliseconds
          !(key === "lockTimeoutMs" &&
            ["2^53", "2^53+2", "1e308"].includes(h.name))
        ),
        (v) => SharedHeap.create(sab, { [key]: v }),
      );
    }
    refuse(
      "SharedHeap.create(sab, { strict })",
      [...objectsBut("undefined", "true"), { name: "1", value: 1 }],
      (v) => SharedHeap.create(sab, { strict: v as boolean }),
    );
  });

  it("SharedHeap.attach() refuses hostile, foreign and forged descriptors", () => {
    const { heap, other, state } = setup();
    const d = heap.descriptor();
    const forged = (patch: Record<string, unknown>) => ({ ...d, ...patch });
    refuse(
      "SharedHeap.attach(descriptor)",
      [
        ...hostileHandles({
          otherInstance: () => ({ ...other.descriptor(), heapId: d.heapId }),
          lookalike: () => forged({ heapId: d.heapId + 2 }),
          foreign: () => ({ kind: "allot.shared-buffer", block: 0 }),
        }),
        ...numbers.map((h) => ({
          name: `byteOffset ${h.name}`,
          value: forged({ byteOffset: h.value }),
        })).filter((h) => h.name !== "byteOffset undefined"),
        ...hostileObjects().map((h) => ({
          name: `memory ${h.name}`,
          value: forged({ memory: h.value }),
        })),
        ...numbers.map((h) => ({
          name: `heapId ${h.name}`,
          value: forged({ heapId: h.value }),
        })),
        ...numbersBut("undefined", "0.5", "1.5").map((h) => ({
          name: `lockTimeoutMs ${h.name}`,
          value: forged({ lockTimeoutMs: h.value }),
        })).filter((h) => !/2\^53|1e308/.test(h.name)),
        { name: "throwing memory getter", value: throwingGetter("memory") },
      ],
      (v) => SharedHeap.attach(v as SharedHeapDescriptor),
      { snapshot: state },
    );
    heap.close();
    other.close();
    refuse(
      "SharedHeap.attach(closed heap's descriptor)",
      [{ name: "closed", value: d }],
      (v) => SharedHeap.attach(v as SharedHeapDescriptor),
    );
  });

  it("alloc(), tryAlloc(), free(), usableByteLength() and bytes() refuse hostile sizes, alignments and offsets", () => {
    const { heap, other, blocks, state } = setup();
    const opts = { snapshot: state };
    for (const name of ["alloc", "tryAlloc"] as const) {
      refuse(
        `${name}(byteLength)`,
        numbersBut("undefined"),
        (v) => heap[name](v as number),
        opts,
      );
      refuse(
        `${name}(64, alignment)`,
        [
          ...numbersBut("undefined"),
          { name: "0", value: 0 },
          { name: "3", value: 3 },
          { name: "8192", value: 8192 },
        ],
        (v) => heap[name](64, v as number),
        opts,
      );
    }
    const offsets: Hostile[] = [
      ...numbers,
      { name: "inside a block", value: blocks[0] + 8 },
      { name: "inside a large block", value: blocks[1] + 4096 },
      { name: "header", value: 0 },
      { name: "past the end", value: heap.buffer.byteLength + 64 },
      { name: "other heap's block", value: other.alloc(64) + 64 * 1024 },
      {
        name: "freed block",
        value: (() => {
          const b = heap.alloc(64);
          heap.free(b);
          return b;
        })(),
      },
    ];
    refuse("free(byteOffset)", offsets, (v) => heap.free(v as number), opts);
    refuse(
      "usableByteLength(byteOffset)",
      offsets,
      (v) => heap.usableByteLength(v as number),
      opts,
    );
    refuse(
      "bytes(byteOffset, 8)",
      [...numbers, { name: "header", value: 0 }],
      (v) => heap.bytes(v as number, 8),
      opts,
    );
    refuse(
      "bytes(block, byteLength)",
      [...numbers, { name: "past the end", value: 8 * MiB }],
      (v) => heap.bytes(blocks[0], v as number),
      opts,
    );
  });

  it("blocksOf() and reclaim() refuse hostile arenas, own or live arenas and hostile keep lists", () => {
    const { heap, state } = setup();
    const dead = SharedHeap.attach(heap.descriptor());
    const kept = dead.alloc(64);
    const opts = { snapshot: state };
    const arenas: Hostile[] = [
      ...numbers,
      { name: "64", value: 64 },
      { name: "an unused arena", value: 40 },
    ];
    refuse(
      "blocksOf(arena)",
      arenas,
      (v) => heap.blocksOf(v as number),
      opts,
    );
    refuse(
      "reclaim(arena)",
      [...arenas, { name: "own arena", value: heap.arena }],
      (v) => heap.reclaim(v as number),
      opts,
    );
    refuse(
      "reclaim(arena, options)",
      objectsBut("undefined", "{}", "[]", "() => {}"),
      (v) => heap.reclaim(dead.arena, v as object),
      opts,
    );
    const throwingIterable = {
      [Symbol.iterator](): Iterator<number> {
        throw new HostileTrapError("iterator");
      },
    };
    refuse(
      "reclaim(arena, { keep })",
      [
        ...objectsBut("undefined", "[]", "() => {}", "null"),
        { name: "throwing iterator", value: throwingIterable },
        { name: "[trap]", value: [trapObject()] },
        ...numbers.map((h) => ({ name: `[${h.name}]`, value: [h.value] })),
      ],
      (v) => heap.reclaim(dead.arena, { keep: v as number[] }),
      opts,
    );
    dead.free(kept);
    dead.detach();
  });

  it("a detached or closed handle refuses every call with HeapClosedError, changing nothing", () => {
    const { heap, blocks } = setup();
    const attached = SharedHeap.attach(heap.descriptor());
    attached.detach();
    const calls: [string, (h: SharedHeap) => unknown][] = [
      ["alloc", (h) => h.alloc(64)],
      ["tryAlloc", (h) => h.tryAlloc(64)],
      ["free", (h) => h.free(blocks[0])],
      ["reclaim", (h) => h.reclaim(5)],
    ];
    const before = heap.stats();
    for (const [name, call] of calls) {
      refuse(
        `detached handle ${name}()`,
        [{ name: "detached", value: attached }],
        (v) => call(v as SharedHeap),
      );
    }
    assert.deepEqual(heap.stats(), before);
  });

  it("SharedHeapAllocator refuses hostile heaps, sizes, buffers and descriptors", () => {
    const { heap, other, allocator, buffer, state } = setup();
    refuse(
      "new SharedHeapAllocator(heap)",
      hostileHandles({
        lookalike: () => ({ buffer: heap.buffer, heapId: heap.heapId }),
      }),
      (v) => new SharedHeapAllocator(v as SharedHeap),
    );
    const opts = { snapshot: state };
    refuse(
      "allocate(byteLength)",
      [...numbersBut("undefined"), { name: "8 MiB", value: 8 * MiB }],
      (v) => allocator.allocate(v as number),
      opts,
    );
    const otherAllocator = new SharedHeapAllocator(other);
    const buffers = hostileHandles({
      otherInstance: () =>
        Buffer.fromData("i32", [1], { allocator: otherAllocator }),
      stale: () => {
        const b = Buffer.fromData("i32", [1], { allocator });
        b.release();
        return b;
      },
      foreign: () => Buffer.fromData("i32", [1]),
    });
    refuse("share(buffer)", buffers, (v) => allocator.share(v as Buffer), opts);
    const d = allocator.share(buffer);
    allocator.discard(d); // (share added a reference: drop it)
    const forged = (patch: Record<string, unknown>) => ({ ...d, ...patch });
    const descriptors: Hostile[] = [
      ...hostileHandles({
        otherInstance: () =>
          otherAllocator.share(
            Buffer.fromData("i32", [1], { allocator: otherAllocator }),
          ),
        stale: () => {
          const b = Buffer.fromData("i32", [1], { allocator });
          const s = allocator.share(b);
          allocator.discard(s);
          b.release();
          return s;
        },
        lookalike: () => ({ ...d, kind: "allot.shared-heap" }),
      }),
      ...numbers.map((h) => ({
        name: `block ${h.name}`,
        value: forged({ block: h.value }),
      })),
      ...numbers.map((h) => ({
        name: `byteLength ${h.name}`,
        value: forged({ byteLength: h.value }),
      })),
      ...numbers.map((h) => ({
        name: `heapId ${h.name}`,
        value: forged({ heapId: h.value }),
      })),
      { name: "block inside the data", value: forged({ block: d.block + 64 }) },
      { name: "throwing kind getter", value: throwingGetter("kind") },
    ];
    // (a freed descriptor's count is 0, as documented)
    assert.equal(
      allocator.refCount(
        descriptors.find((h) => h.name === "stale")!
          .value as SharedBufferDescriptor,
      ),
      0,
    );
    refuse(
      "refCount(descriptor)",
      // (nor can it tell a block offset that never held one from a freed
      // block: no header there, count 0)
      descriptors.filter((h) =>
        h.name !== "stale" && h.name !== "block inside the data"
      ),
      (v) => allocator.refCount(v as SharedBufferDescriptor),
      opts,
    );
    refuse(
      "discard(descriptor)",
      descriptors,
      (v) => allocator.discard(v as SharedBufferDescriptor),
      opts,
    );
    const viewFields: Hostile[] = [
      ...hostileObjects().map((h) => ({
        name: `dtype ${h.name}`,
        value: forged({ dtype: h.value }),
      })),
      { name: 'dtype "f128"', value: forged({ dtype: "f128" }) },
      ...hostileObjects().filter((h) => h.name !== "[]").map((h) => ({
        name: `shape ${h.name}`,
        value: forged({ shape: h.value }),
      })),
      ...numbers.map((h) => ({
        name: `shape [${h.name}]`,
        value: forged({ shape: [h.value] }),
      })),
      { name: "shape past the storage", value: forged({ shape: [5] }) },
      // (an offset of null or undefined is the default, 0)
      ...numbersBut("null", "undefined").map((h) => ({
        name: `offset ${h.name}`,
        value: forged({ offset: h.value }),
      })),
      ...numbers.map((h) => ({
        name: `strides [${h.name}]`,
        value: forged({ strides: [h.value] }),
      })),
    ];
    refuse(
      "receive(descriptor)",
      [...descriptors, ...viewFields],
      (v) => allocator.receive(v as SharedBufferDescriptor),
      opts,
    );
  });
});
