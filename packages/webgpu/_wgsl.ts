/**
 * Internal: WGSL sources of the copy kernels. Every runtime fact (counts,
 * offsets, shape, strides) is read from the `meta` storage buffer; the
 * sources vary only by compile-time facts (element width, aliasing,
 * workgroup size), which make up the cache key.
 *
 * @module
 */

import type { Kernel } from "./kernel.ts";

/** Most dimensions a strided view may have. */
export const MAX_RANK = 16;
/** u32 words of the meta buffer: header plus shape and strides. */
export const META_WORDS = 8 + 3 * MAX_RANK;

function header(aliased: boolean, atomic = false): string {
  // Aliased: source and destination share one buffer; WebGPU forbids binding
  // one buffer as read-only and writable storage in the same dispatch, so it
  // is bound once, read-write. Atomic: sub-word elements scattered to a
  // strided destination, where two threads may share a word.
  const t = atomic ? "atomic<u32>" : "u32";
  const load = (a: string) => (atomic ? `atomicLoad(&${a})` : a);
  return aliased
    ? `@group(0) @binding(0) var<storage, read_write> buf: array<${t}>;
@group(0) @binding(1) var<storage, read> info: array<u32>;
fn src_word(i: u32) -> u32 { return ${load("buf[i]")}; }
`
    : `@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<${t}>;
@group(0) @binding(2) var<storage, read> info: array<u32>;
fn src_word(i: u32) -> u32 { return src[i]; }
`;
}

function plainDst(aliased: boolean): string {
  const a = aliased ? "buf" : "dst";
  return `fn dst_read(i: u32) -> u32 { return ${a}[i]; }
fn dst_write(i: u32, v: u32) { ${a}[i] = v; }
`;
}

function bindings(aliased: boolean): GPUBufferBindingType[] {
  return aliased
    ? ["storage", "read-only-storage"]
    : ["read-only-storage", "storage", "read-only-storage"];
}

function entry(workgroupSize: number): string {
  return `@compute @workgroup_size(${workgroupSize})
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * ${workgroupSize}u;
  if (i >= info[0]) { return; }
  run(i);
}
`;
}

/**
 * Strided to contiguous, or to strided with `dstStrided`. Meta:
 * [invocations, count, rank, srcOffset, dstOffset, -, -, -, shape[MAX_RANK],
 * srcStrides[MAX_RANK] (i32), dstStrides[MAX_RANK] (i32)], offsets in
 * elements from each binding's start.
 */
export function _stridedKernel(
  elementBytes: 1 | 2 | 4 | 8,
  aliased: boolean,
  dstStrided: boolean,
  workgroupSize: number,
): Kernel {
  const index = (name: string, base: number, strides: number) => `
fn ${name}(e: u32) -> u32 {
  var rest = e;
  var pos = i32(info[${base}]);
  let rank = info[2];
  for (var d = i32(rank) - 1; d >= 0; d--) {
    let n = info[8u + u32(d)];
    let c = rest % n;
    rest = rest / n;
    pos += i32(c) * bitcast<i32>(info[${strides}u + u32(d)]);
  }
  return u32(pos);
}
`;
  const atomic = dstStrided && elementBytes < 4;
  let body: string;
  if (dstStrided) {
    const a = aliased ? "buf" : "dst";
    if (elementBytes === 4) {
      body = `fn run(i: u32) {
  ${a}[dst_index(i)] = src_word(src_index(i));
}
`;
    } else if (elementBytes === 8) {
      body = `fn run(i: u32) {
  let s = src_index(i) * 2u;
  let d = dst_index(i) * 2u;
  ${a}[d] = src_word(s);
  ${a}[d + 1u] = src_word(s + 1u);
}
`;
    } else {
      const per = 4 / elementBytes;
      const bits = elementBytes * 8;
      const mask = elementBytes === 1 ? "0xffu" : "0xffffu";
      // Each thread owns its element's bits; clear-then-set with atomics
      // keeps the neighbours' bits in a shared word.
      body = `fn run(i: u32) {
  let s = src_index(i);
  let v = (src_word(s / ${per}u) >> ((s % ${per}u) * ${bits}u)) & ${mask};
  let d = dst_index(i);
  let sh = (d % ${per}u) * ${bits}u;
  atomicAnd(&${a}[d / ${per}u], ~(${mask} << sh));
  atomicOr(&${a}[d / ${per}u], v << sh);
}
`;
    }
    return {
      name: "strided_copy",
      key: `strided2:b${elementBytes}:${
        aliased ? "a" : "s"
      }:wg${workgroupSize}`,
      source: header(aliased, atomic) + index("src_index", 3, 8 + MAX_RANK) +
        index("dst_index", 4, 8 + 2 * MAX_RANK) + body + entry(workgroupSize),
      bindings: bindings(aliased),
      workgroupSize,
    };
  }
  if (elementBytes === 4) {
    body = `fn run(i: u32) {
  dst_write(info[4] + i, src_word(src_index(i)));
}
`;
  } else if (elementBytes === 8) {
    body = `fn run(i: u32) {
  let s = src_index(i) * 2u;
  let d = (info[4] + i) * 2u;
  dst_write(d, src_word(s));
  dst_write(d + 1u, src_word(s + 1u));
}
`;
  } else {
    const per = 4 / elementBytes;
    const bits = elementBytes * 8;
    const mask = elementBytes === 1 ? "0xffu" : "0xffffu";
    // One invocation per destination word; words the range only partly
    // covers keep their other bytes (read-modify-write, one writer each).
    body = `fn run(i: u32) {
  let count = info[1];
  let dst_off = info[4];
  let w = dst_off / ${per}u + i;
  let first = w * ${per}u;
  var word = 0u;
  if (first < dst_off || first + ${per}u > dst_off + count) {
    word = dst_read(w);
  }
  for (var k = 0u; k < ${per}u; k++) {
    let slot = first + k;
    if (slot >= dst_off && slot < dst_off + count) {
      let s = src_index(slot - dst_off);
      let v = (src_word(s / ${per}u) >> ((s % ${per}u) * ${bits}u)) & ${mask};
      let sh = k * ${bits}u;
      word = (word & ~(${mask} << sh)) | (v << sh);
    }
  }
  dst_write(w, word);
}
`;
  }
  return {
    name: "strided_to_contiguous",
    key: `strided:b${elementBytes}:${aliased ? "a" : "s"}:wg${workgroupSize}`,
    source: header(aliased) + plainDst(aliased) +
      index("src_index", 3, 8 + MAX_RANK) + body + entry(workgroupSize),
    bindings: bindings(aliased),
    workgroupSize,
  };
}

/**
 * Byte copy between contiguous ranges. Meta: [invocations, byteLength,
 * srcByteOffset, dstByteOffset], offsets from each binding's start.
 */
export function _copyBytesKernel(
  aliased: boolean,
  workgroupSize: number,
): Kernel {
  const body = `fn run(i: u32) {
  let len = info[1];
  let src_off = info[2];
  let dst_off = info[3];
  let w = dst_off / 4u + i;
  let first = w * 4u;
  var word = 0u;
  if (first < dst_off || first + 4u > dst_off + len) {
    word = dst_read(w);
  }
  for (var k = 0u; k < 4u; k++) {
    let b = first + k;
    if (b >= dst_off && b < dst_off + len) {
      let s = b - dst_off + src_off;
      let v = (src_word(s / 4u) >> ((s % 4u) * 8u)) & 0xffu;
      word = (word & ~(0xffu << (k * 8u))) | (v << (k * 8u));
    }
  }
  dst_write(w, word);
}
`;
  return {
    name: "copy_bytes",
    key: `copy:${aliased ? "a" : "s"}:wg${workgroupSize}`,
    source: header(aliased) + plainDst(aliased) + body + entry(workgroupSize),
    bindings: bindings(aliased),
    workgroupSize,
  };
}

/**
 * Fill a byte range with a repeating pattern. Meta: [invocations,
 * byteLength, dstByteOffset, pattern of even words, pattern of odd words].
 */
export function _fillKernel(workgroupSize: number): Kernel {
  const source =
    `@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<storage, read> info: array<u32>;
fn run(i: u32) {
  let len = info[1];
  let off = info[2];
  let w = off / 4u + i;
  let first = w * 4u;
  let pattern = select(info[3], info[4], (w & 1u) == 1u);
  if (first >= off && first + 4u <= off + len) {
    dst[w] = pattern;
    return;
  }
  var word = dst[w];
  for (var k = 0u; k < 4u; k++) {
    let b = first + k;
    if (b >= off && b < off + len) {
      let m = 0xffu << (k * 8u);
      word = (word & ~m) | (pattern & m);
    }
  }
  dst[w] = word;
}
` + entry(workgroupSize);
  return {
    name: "fill",
    key: `fill:wg${workgroupSize}`,
    source,
    bindings: ["storage", "read-only-storage"],
    workgroupSize,
  };
}
