// A Node user's TypeScript against the packed types, compiled by
// `deno task test:node` with tsc --strict, exactOptionalPropertyTypes and
// noUncheckedIndexedAccess, under moduleResolution bundler (DOM lib) and
// node16 with Node's own types only (no DOM lib). It uses no WebGPU package.
import {
  AllotError,
  hostBuffer,
  type HostMemory,
  InvalidArgumentError,
  ManualStream,
  MockSegmentSource,
  type Stream,
} from "@allot/core";
import { CachingAllocator } from "@allot/caching";
import { CpuAllocator } from "@allot/cpu";
import { Buffer } from "@allot/storage";
import {
  HeapOverlapError,
  SharedHeap,
  type SharedMemory,
} from "@allot/threads";

/** Runs a little of everything; returns the first element read. */
export function run(): number {
  const caching = new CachingAllocator(new MockSegmentSource());
  const stream = new ManualStream();
  using block = caching.allocate(1024, { stream });
  // An option that may be undefined (exactOptionalPropertyTypes is on).
  const maybe: Stream | undefined = pick(stream);
  using other = caching.allocate(1024, { stream: maybe, tag: undefined });
  block.recordStream(new ManualStream());
  const cpu = new CpuAllocator({ byteLength: 1 << 20 });
  using ptr = cpu.allocate(64);
  using b = Buffer.fromData("f32", [1, 2, 3, 4], { shape: [2, 2] });
  const first = b.toData()[0]; // number | undefined here
  const memory: HostMemory = new WebAssemblyLike().memory ?? new ArrayBuffer(8);
  const shared: SharedMemory = new SharedArrayBuffer(1 << 20);
  using heap = SharedHeap.create(shared);
  try {
    caching.allocate(-1);
  } catch (error) {
    if (error instanceof InvalidArgumentError) {
      const limit: unknown = error.limit;
      void limit;
    } else if (error instanceof HeapOverlapError) {
      throw error;
    } else if (!(error instanceof AllotError)) throw error;
  }
  void ptr, heap, other;
  return (first ?? 0) + hostBuffer(memory).byteLength * 0;
}

/** Stands in for code that may or may not have a stream. */
function pick(stream: Stream): Stream | undefined {
  return [stream][1];
}

/** Stands in for code that may or may not have a wasm memory. */
class WebAssemblyLike {
  readonly memory: HostMemory | undefined = undefined;
}
