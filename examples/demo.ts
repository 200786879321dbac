/**
 * The end-to-end demo (`./scripts/allot demo`). It grows with the project;
 * today it shows the core ownership types at work.
 *
 * @module
 */

import {
  DataPtr,
  Device,
  IntrusivePtr,
  IntrusiveTarget,
  LeakDetector,
  Stat,
} from "@allot/core";

const bytes = new Stat();
const heap = new ArrayBuffer(1024);
let next = 0;

function allocate(byteLength: number): DataPtr<ArrayBuffer, number> {
  const offset = next;
  next += byteLength;
  bytes.increase(byteLength);
  console.log(`  allocate ${byteLength} B at offset ${offset}`);
  return new DataPtr(heap, offset, byteLength, Device.parse("cpu:0"), {
    context: byteLength,
    deleter: (n) => {
      bytes.decrease(n);
      console.log(`  free ${n} B`);
    },
  });
}

class Storage extends IntrusiveTarget {
  constructor(readonly data: DataPtr<ArrayBuffer, number>) {
    super();
  }
  protected override releaseResources(): void {
    this.data.release();
  }
}

console.log("allot demo: core ownership types");
const a = IntrusivePtr.make(new Storage(allocate(256)));
const view = a.clone();
const weak = a.weak();
console.log(`  useCount=${a.useCount} weakUseCount=${a.weakUseCount}`);
a.release();
console.log(`  after one release: useCount=${view.useCount}`);
view.release();
console.log(`  weak.lock() after last release: ${weak.lock()}`);
weak.release();

{
  using scratch = allocate(128);
  new Uint8Array(scratch.memory, scratch.byteOffset, 128).fill(7);
}

const detector = new LeakDetector();
console.log(`  leak detector watching: ${detector.watching}`);
console.log(
  `  bytes: current=${bytes.current} peak=${bytes.peak} allocated=${bytes.allocated} freed=${bytes.freed}`,
);
if (bytes.current !== 0) throw new Error("demo leaked bytes");
console.log("allot demo: done, nothing leaked");
