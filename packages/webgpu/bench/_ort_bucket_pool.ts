// onnxruntime-web's JSEP WebGPU buffer pool, written after
// js/web/lib/wasm/jsep/webgpu/gpu-data-manager.ts (GpuDataManagerImpl) for
// benchmarks: a request is 16-byte aligned and rounded up to the first
// bucket that holds it (64 B ... 160 MiB; larger sizes keep their own
// size); a released storage buffer goes at once to a free list keyed by
// usage and size; at the end of each session run (`refreshPendingBuffers`)
// every storage free list of a size that is no bucket, or as long as its
// bucket's limit, destroys one buffer. (onnxruntime destroys that buffer
// but leaves it in the list; this pool removes it.)

import { ORT_BUCKETS, ortBucketSize } from "@allot/trace";

const LIMITS = ORT_BUCKETS;

export class OrtBucketPool {
  #device: GPUDevice;
  #free = new Map<number, Map<number, GPUBuffer[]>>();
  #live = new Set<GPUBuffer>();
  created = 0;
  constructor(device: GPUDevice) {
    this.#device = device;
  }
  getBuffer(size: number, usage: number): GPUBuffer {
    const bucket = ortBucketSize(size);
    const list = this.#free.get(usage)?.get(bucket);
    let buffer = list !== undefined && list.length > 0 ? list.pop() : undefined;
    if (buffer === undefined) {
      buffer = this.#device.createBuffer({ size: bucket, usage });
      this.created++;
    }
    this.#live.add(buffer);
    return buffer;
  }
  release(buffer: GPUBuffer): void {
    if (!this.#live.delete(buffer)) {
      throw new Error("releasing data does not exist");
    }
    let byUsage = this.#free.get(buffer.usage);
    if (byUsage === undefined) {
      this.#free.set(buffer.usage, byUsage = new Map());
    }
    let list = byUsage.get(buffer.size);
    if (list === undefined) byUsage.set(buffer.size, list = []);
    list.push(buffer);
  }
  refreshPendingBuffers(): void {
    for (const [usage, sizes] of this.#free) {
      if (!(usage & GPUBufferUsage.STORAGE)) continue;
      for (const [size, list] of sizes) {
        const max = LIMITS.get(size);
        if (list.length > 0 && (max === undefined || list.length >= max)) {
          list.pop()!.destroy();
        }
      }
    }
  }
  dispose(): void {
    for (const sizes of this.#free.values()) {
      for (const list of sizes.values()) for (const b of list) b.destroy();
    }
    for (const b of this.#live) b.destroy();
    this.#free.clear();
    this.#live.clear();
  }
}
