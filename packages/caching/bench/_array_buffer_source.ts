// A real segment source for the hit-path benchmark: one `new ArrayBuffer`
// per segment (what a cache-less CPU runtime does).

import { Device, type Segment, type SegmentSource } from "@allot/core";

export class ArrayBufferSegmentSource implements SegmentSource<ArrayBuffer> {
  readonly device: Device = Device.cpu();
  readonly alignment = 64;
  readonly maxSegmentByteLength = 2 ** 31;
  readonly capacityBytes = Infinity;
  tryAllocateSegment(byteLength: number): Segment<ArrayBuffer> {
    return { memory: new ArrayBuffer(byteLength), byteOffset: 0, byteLength };
  }
  freeSegment(_segment: Segment<ArrayBuffer>): void {}
}

// deno-lint-ignore no-explicit-any
type GpuDevice = any;

/** `device.createBuffer` + `destroy`: the raw device a GPU caching allocator sits on. */
export class GpuBufferSegmentSource implements SegmentSource<unknown> {
  readonly device: Device = new Device("webgpu", 0);
  readonly alignment = 256;
  readonly maxSegmentByteLength: number;
  readonly capacityBytes = Infinity;
  #gpu: GpuDevice;
  constructor(gpu: GpuDevice) {
    this.#gpu = gpu;
    this.maxSegmentByteLength = gpu.limits.maxBufferSize;
  }
  tryAllocateSegment(byteLength: number): Segment<unknown> {
    // 0x80 STORAGE | 0x8 COPY_DST | 0x4 COPY_SRC
    const memory = this.#gpu.createBuffer({ size: byteLength, usage: 0x8c });
    return { memory, byteOffset: 0, byteLength };
  }
  freeSegment(segment: Segment<unknown>): void {
    (segment.memory as { destroy(): void }).destroy();
  }
}

/** A WebGPU device when an adapter exists, else `undefined`. */
export async function tryGpuDevice(): Promise<GpuDevice | undefined> {
  // deno-lint-ignore no-explicit-any
  const gpu = (globalThis.navigator as any)?.gpu;
  if (gpu === undefined) return undefined;
  try {
    const adapter = await gpu.requestAdapter();
    return adapter ? await adapter.requestDevice() : undefined;
  } catch {
    return undefined;
  }
}
