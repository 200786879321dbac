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

/** Output elements each invocation of a word-or-wider strided copy moves. */
export const ELEMENTS_PER_INVOCATION = 8;
/** Destination words each invocation of the other kernels writes. */
export const WORDS_PER_INVOCATION = 4;
const C = ELEMENTS_PER_INVOCATION;
const W = WORDS_PER_INVOCATION;

// Per invocation: the index of the first element is found with divisions,
// the next ones by adding the last dimension's stride, with a new division
// chain only where a row ends. Software adapters pay dearly per invocation
// and per integer division; GPUs lose little.
const LAST = `  let rank = info[2];
  var n_last = 1u;
  var s_last = 0i;
  var d_last = 0i;
  if (rank > 0u) {
    n_last = info[7u + rank];
    s_last = bitcast<i32>(info[${7 + MAX_RANK}u + rank]);
    d_last = bitcast<i32>(info[${7 + 2 * MAX_RANK}u + rank]);
  }
`;

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
  owned = false,
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
  const per = 4 / elementBytes;
  const bits = elementBytes * 8;
  const mask = elementBytes === 1 ? "0xffu" : "0xffffu";
  const a = aliased ? "buf" : "dst";
  // owned: the caller guarantees that each destination word is written by
  // one invocation only (rows of whole words, see GpuKernels), so sub-word
  // elements are stored by a plain read-modify-write
  const atomic = dstStrided && elementBytes < 4 && !owned;
  let body: string;
  if (dstStrided || elementBytes >= 4) {
    let store: string;
    if (dstStrided && elementBytes === 4) {
      store = `${a}[dpos] = src_word(pos);`;
    } else if (dstStrided && elementBytes === 8) {
      store = `${a}[dpos * 2u] = src_word(pos * 2u);
    ${a}[dpos * 2u + 1u] = src_word(pos * 2u + 1u);`;
    } else if (dstStrided && owned) {
      store =
        `let v = (src_word(pos / ${per}u) >> ((pos % ${per}u) * ${bits}u)) & ${mask};
    let sh = (dpos % ${per}u) * ${bits}u;
    let w = dpos / ${per}u;
    dst_write(w, (dst_read(w) & ~(${mask} << sh)) | (v << sh));`;
    } else if (dstStrided) {
      // Each thread owns its element's bits; clear-then-set with atomics
      // keeps the neighbours' bits in a shared word.
      store =
        `let v = (src_word(pos / ${per}u) >> ((pos % ${per}u) * ${bits}u)) & ${mask};
    let sh = (dpos % ${per}u) * ${bits}u;
    atomicAnd(&${a}[dpos / ${per}u], ~(${mask} << sh));
    atomicOr(&${a}[dpos / ${per}u], v << sh);`;
    } else if (elementBytes === 4) {
      store = `dst_write(dpos, src_word(pos));`;
    } else {
      store = `dst_write(dpos * 2u, src_word(pos * 2u));
    dst_write(dpos * 2u + 1u, src_word(pos * 2u + 1u));`;
    }
    const dstStart = dstStrided ? "dst_index(e0)" : "info[4] + e0";
    const dstJump = dstStrided ? "dst_index(e + 1u)" : "info[4] + e + 1u";
    const dstStep = dstStrided ? "u32(i32(dpos) + d_last)" : "dpos + 1u";
    body = `fn run(i: u32) {
  let count = info[1];
${LAST}  let e0 = i * ${C}u;
  var pos = src_index(e0);
  var dpos = ${dstStart};
  var c = e0 % n_last;
  for (var k = 0u; k < ${C}u; k++) {
    let e = e0 + k;
    if (e >= count) { break; }
    ${store}
    c++;
    if (c == n_last) {
      c = 0u;
      pos = src_index(e + 1u);
      dpos = ${dstJump};
    } else {
      pos = u32(i32(pos) + s_last);
      dpos = ${dstStep};
    }
  }
}
`;
  } else {
    // One invocation per run of destination words; words the range only
    // partly covers keep their other bytes (read-modify-write, one writer).
    body = `fn run(i: u32) {
  let count = info[1];
${LAST}  let dst_off = info[4];
  let end = dst_off + count;
  let last_w = (end - 1u) / ${per}u;
  let w0 = dst_off / ${per}u + i * ${W}u;
  var e = max(w0 * ${per}u, dst_off) - dst_off;
  var pos = src_index(e);
  var c = e % n_last;
  for (var j = 0u; j < ${W}u; j++) {
    let w = w0 + j;
    if (w > last_w) { break; }
    let first = w * ${per}u;
    var word = 0u;
    if (first < dst_off || first + ${per}u > end) {
      word = dst_read(w);
    }
    for (var k = 0u; k < ${per}u; k++) {
      let slot = first + k;
      if (slot >= dst_off && slot < end) {
        let v = (src_word(pos / ${per}u) >> ((pos % ${per}u) * ${bits}u)) & ${mask};
        let sh = k * ${bits}u;
        word = (word & ~(${mask} << sh)) | (v << sh);
        e++;
        c++;
        if (c == n_last) {
          c = 0u;
          pos = src_index(e);
        } else {
          pos = u32(i32(pos) + s_last);
        }
      }
    }
    dst_write(w, word);
  }
}
`;
  }
  const dstIndex = dstStrided ? index("dst_index", 4, 8 + 2 * MAX_RANK) : "";
  return {
    name: dstStrided ? "strided_copy" : "strided_to_contiguous",
    key: `${
      dstStrided
        ? (atomic || elementBytes >= 4 || !owned ? "strided2" : "strided2o")
        : "strided"
    }:b${elementBytes}:${aliased ? "a" : "s"}:c${C}:w${W}:wg${workgroupSize}`,
    source: header(aliased, atomic) + (atomic ? "" : plainDst(aliased)) +
      index("src_index", 3, 8 + MAX_RANK) + dstIndex + body +
      entry(workgroupSize),
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
  let end = dst_off + len;
  let last_w = (end - 1u) / 4u;
  let w0 = dst_off / 4u + i * ${W}u;
  for (var j = 0u; j < ${W}u; j++) {
    let w = w0 + j;
    if (w > last_w) { break; }
    let first = w * 4u;
    if (first >= dst_off && first + 4u <= end) {
      // A whole word: one or two source words, funnel-shifted.
      let s0 = first - dst_off + src_off;
      let sw = s0 / 4u;
      let sh = (s0 % 4u) * 8u;
      if (sh == 0u) {
        dst_write(w, src_word(sw));
      } else {
        dst_write(w, (src_word(sw) >> sh) | (src_word(sw + 1u) << (32u - sh)));
      }
    } else {
      var word = dst_read(w);
      for (var k = 0u; k < 4u; k++) {
        let b = first + k;
        if (b >= dst_off && b < end) {
          let s = b - dst_off + src_off;
          let v = (src_word(s / 4u) >> ((s % 4u) * 8u)) & 0xffu;
          word = (word & ~(0xffu << (k * 8u))) | (v << (k * 8u));
        }
      }
      dst_write(w, word);
    }
  }
}
`;
  return {
    name: "copy_bytes",
    key: `copy:${aliased ? "a" : "s"}:w${W}:wg${workgroupSize}`,
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
  let end = off + len;
  let last_w = (end - 1u) / 4u;
  let w0 = off / 4u + i * ${W}u;
  for (var j = 0u; j < ${W}u; j++) {
    let w = w0 + j;
    if (w > last_w) { break; }
    let first = w * 4u;
    let pattern = select(info[3], info[4], (w & 1u) == 1u);
    if (first >= off && first + 4u <= end) {
      dst[w] = pattern;
    } else {
      var word = dst[w];
      for (var k = 0u; k < 4u; k++) {
        let b = first + k;
        if (b >= off && b < end) {
          let m = 0xffu << (k * 8u);
          word = (word & ~m) | (pattern & m);
        }
      }
      dst[w] = word;
    }
  }
}
` + entry(workgroupSize);
  return {
    name: "fill",
    key: `fill:w${W}:wg${workgroupSize}`,
    source,
    bindings: ["storage", "read-only-storage"],
    workgroupSize,
  };
}

/**
 * Block transpose, for views whose unit-stride dimension is not the last
 * (see `_block_plan.ts`): each invocation loads `per` 16-byte vectors, one
 * per source row of its block, and stores `per` vectors of transposed
 * output, where `per` = 16 / elementBytes (a 4×4 block of 4-byte
 * elements, 2×2 of 8-byte, 8×8 of 2-byte), for `BLOCKS` consecutive
 * blocks along the output's last dimension. No workgroup memory and no
 * barrier: software adapters pay heavily for those. Meta: [invocations,
 * blockCols, blockRows, srcBase (i32), dstBase, otherRank, srcColStride
 * (i32), dstRowStride, otherShape[MAX_RANK], otherSrc[MAX_RANK] (i32),
 * otherDst[MAX_RANK]], in vectors.
 */
export function _blockTransposeKernel(
  elementBytes: 2 | 4 | 8,
  aliased: boolean,
  workgroupSize: number,
  BLOCKS: number,
): Kernel {
  // the 2-byte source takes ~17 µs to build: build each variant once
  const key = `block:b${elementBytes}:${
    aliased ? "a" : "s"
  }:q${BLOCKS}:wg${workgroupSize}`;
  let kernel = blockKernels.get(key);
  if (kernel === undefined) {
    kernel = buildBlockTranspose(
      elementBytes,
      aliased,
      workgroupSize,
      BLOCKS,
      key,
    );
    blockKernels.set(key, kernel);
  }
  return kernel;
}

const blockKernels = new Map<string, Kernel>();

function buildBlockTranspose(
  elementBytes: 2 | 4 | 8,
  aliased: boolean,
  workgroupSize: number,
  BLOCKS: number,
  key: string,
): Kernel {
  const per = 16 / elementBytes;
  const decl = aliased
    ? `@group(0) @binding(0) var<storage, read_write> buf: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> info: array<u32>;
fn load4(i: u32) -> vec4<u32> { return buf[i]; }
fn store4(i: u32, v: vec4<u32>) { buf[i] = v; }
`
    : `@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> info: array<u32>;
fn load4(i: u32) -> vec4<u32> { return src[i]; }
fn store4(i: u32, v: vec4<u32>) { dst[i] = v; }
`;
  let loads = "";
  for (let j = 0; j < per; j++) {
    loads += `    let v${j} = load4(u32(s_row + ${j} * s_col));\n`;
  }
  const lanes = "xyzw";
  let stores = "";
  for (let i = 0; i < per; i++) {
    let value: string;
    if (per === 4) {
      value = `vec4<u32>(v0.${lanes[i]}, v1.${lanes[i]}, v2.${lanes[i]}, v3.${
        lanes[i]
      })`;
    } else if (per === 2) {
      const a = lanes[2 * i], b = lanes[2 * i + 1];
      value = `vec4<u32>(v0.${a}, v0.${b}, v1.${a}, v1.${b})`;
    } else {
      // element i of a vector of eight 16-bit elements
      const half = (v: number) =>
        `((v${v}.${lanes[i >> 1]} >> ${16 * (i & 1)}u) & 0xffffu)`;
      value = `vec4<u32>(${
        [0, 1, 2, 3].map((w) => `${half(2 * w)} | (${half(2 * w + 1)} << 16u)`)
          .join(", ")
      })`;
    }
    stores += `    store4(d_row + ${i}u * info[7], ${value});\n`;
  }
  // each invocation runs BLOCKS blocks along the output's last dimension
  // (the plan makes blockCols a multiple): one index decomposition for all
  const body = `fn run(i: u32) {
  let cols = info[1] / ${BLOCKS}u;
  let rows = info[2];
  let cb0 = (i % cols) * ${BLOCKS}u;
  var rest = i / cols;
  let rb = rest % rows;
  rest = rest / rows;
  var s_off = bitcast<i32>(info[3]);
  var d_off = info[4];
  for (var d = i32(info[5]) - 1; d >= 0; d--) {
    let n = info[8u + u32(d)];
    let c = rest % n;
    rest = rest / n;
    s_off += i32(c) * bitcast<i32>(info[${8 + MAX_RANK}u + u32(d)]);
    d_off += c * info[${8 + 2 * MAX_RANK}u + u32(d)];
  }
  let s_col = bitcast<i32>(info[6]);
  var s_row = s_off + i32(cb0 * ${per}u) * s_col + i32(rb);
  var d_row = d_off + rb * ${per}u * info[7] + cb0;
  for (var q = 0u; q < ${BLOCKS}u; q++) {
${loads}${stores}    s_row += ${per} * s_col;
    d_row += 1u;
  }
}
`;
  return {
    name: "block_transpose",
    key,
    source: decl + body + entry(workgroupSize),
    bindings: bindings(aliased),
    workgroupSize,
  };
}

/**
 * The variant of a two-binding kernel whose source is declared read-write:
 * for a source and destination in one buffer too far apart to bind as one
 * range, the buffer is bound twice, and WebGPU allows that only when both
 * bindings are writable (the bound ranges must not overlap).
 */
export function _sourceWritable(kernel: Kernel): Kernel {
  return {
    name: kernel.name,
    key: `${kernel.key}:rw`,
    source: kernel.source.replace(
      "var<storage, read> src",
      "var<storage, read_write> src",
    ),
    bindings: ["storage", ...kernel.bindings.slice(1)],
    workgroupSize: kernel.workgroupSize,
  };
}
