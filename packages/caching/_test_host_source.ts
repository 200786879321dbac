/**
 * Test-only: a segment source of host memory, one `ArrayBuffer` per segment,
 * for tests that read and write the bytes of blocks (the mock source's
 * memory is no `ArrayBuffer`).
 *
 * Not exported from `mod.ts`; excluded from publish (`**\/_test_*.ts`).
 *
 * @module
 */

import { Device, type Segment, type SegmentSource } from "@allot/core";

/** Host memory segments: one ArrayBuffer each, never refused. */
export class HostSource implements SegmentSource<ArrayBuffer> {
  readonly device: Device = Device.cpu();
  readonly alignment = 64;
  readonly maxSegmentByteLength = 2 ** 30;
  readonly capacityBytes = Infinity;
  tryAllocateSegment(byteLength: number): Segment<ArrayBuffer> {
    return { memory: new ArrayBuffer(byteLength), byteOffset: 0, byteLength };
  }
  freeSegment(): void {}
}
