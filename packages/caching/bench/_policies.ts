// Minimal pooling policies of two GPU runtimes, for trace replay next to
// allot's caching allocator. Both take whole buffers from a segment source
// and never split them.

import { ORT_BUCKETS } from "@allot/trace";
import type { Segment, SegmentSource } from "@allot/core";

/** A pool the trace replay drives. */
export interface ReplayPool<H> {
  allocate(byteLength: number): H;
  free(handle: H): void;
  /** Called at trace marks (end of a request or step). */
  flush?(): void;
}

/**
 * TF.js WebGPU `BufferManager` policy: sizes padded to 4 bytes; a free list
 * per exact size; a buffer is reused only for a request of the same padded
 * size; nothing is ever returned to the device.
 */
export class ExactSizePool<M> implements ReplayPool<Segment<M>> {
  #source: SegmentSource<M>;
  #free = new Map<number, Segment<M>[]>();
  constructor(source: SegmentSource<M>) {
    this.#source = source;
  }
  allocate(byteLength: number): Segment<M> {
    const size = Math.ceil(byteLength / 4) * 4;
    const list = this.#free.get(size);
    if (list !== undefined && list.length > 0) return list.pop()!;
    const segment = this.#source.tryAllocateSegment(size);
    if (segment === undefined) throw new Error(`out of memory: ${size}`);
    return segment;
  }
  free(segment: Segment<M>): void {
    let list = this.#free.get(segment.byteLength);
    if (list === undefined) this.#free.set(segment.byteLength, list = []);
    list.push(segment);
  }
}

/** onnxruntime-web's bucket sizes and how many free buffers each keeps. */
const BUCKETS: [number, number][] = [...ORT_BUCKETS];
const BUCKET_LIMIT = new Map(BUCKETS);

/**
 * onnxruntime-web `GpuDataManager` policy: a request takes the smallest
 * bucket that holds it (sizes above the largest bucket round to 16 bytes);
 * free buffers are kept per bucket size and reused for the same bucket; at
 * each session-run boundary (`flush`), every size whose free list is not a
 * bucket or is at its limit destroys one buffer.
 */
export class BucketPool<M> implements ReplayPool<Segment<M>> {
  #source: SegmentSource<M>;
  #free = new Map<number, Segment<M>[]>();
  constructor(source: SegmentSource<M>) {
    this.#source = source;
  }
  static bucketSize(byteLength: number): number {
    for (const [size] of BUCKETS) if (byteLength <= size) return size;
    return Math.ceil(byteLength / 16) * 16;
  }
  allocate(byteLength: number): Segment<M> {
    const size = BucketPool.bucketSize(byteLength);
    const list = this.#free.get(size);
    if (list !== undefined && list.length > 0) return list.pop()!;
    const segment = this.#source.tryAllocateSegment(size);
    if (segment === undefined) throw new Error(`out of memory: ${size}`);
    return segment;
  }
  free(segment: Segment<M>): void {
    let list = this.#free.get(segment.byteLength);
    if (list === undefined) this.#free.set(segment.byteLength, list = []);
    list.push(segment);
  }
  flush(): void {
    for (const [size, list] of this.#free) {
      const limit = BUCKET_LIMIT.get(size);
      if (list.length > 0 && (limit === undefined || list.length >= limit)) {
        this.#source.freeSegment(list.pop()!);
      }
    }
  }
}
