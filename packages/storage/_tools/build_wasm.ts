/**
 * Regenerates `../_transpose_wasm.ts` from the WebAssembly text below:
 * `deno run -A packages/storage/_tools/build_wasm.ts`. Dev-only; the package
 * ships the bytes, not this script or wabt.
 *
 * The module imports one memory and exports blocked transposes for 1-, 2-,
 * 4- and 8-byte elements, a run copier (`rows`, bulk memory) and strided
 * row gathers (`g8`, `g16`, `g32`, `g64`):
 *
 *   tN(d, da, s, sb, na, nb): dst[d + a·da + b·N] = src[s + a·N + b·sb]
 *
 * for a < na, b < nb (all addresses and strides in bytes). The source is
 * contiguous along a and the destination along b; q×q blocks (q = 16 / N
 * bytes: 16×16, 8×8, 4×4, 2×2) are transposed in SIMD registers inside
 * tiles; ragged edges are scalar.
 *
 * @module
 */

import initWabt from "npm:wabt@1.0.39";

/**
 * Edge of the square tiles, in elements. Small tiles limit how many rows a
 * tile touches, which matters at power-of-two strides where those rows share
 * cache sets (measured on filled memory: 16 is best on 1024×1024 f32 and
 * within 25% of the best, 8, on 1000×1000).
 */
const TILE = 16;

/**
 * Edge of the blocks that group tiles, in elements: all tiles of a block run
 * before the next block, so a transpose whose rows are a page apart touches
 * at most 2 × BLOCK pages at a time, which the TLB holds even without huge
 * pages. (On the measuring machine, with transparent huge pages, 64 to 512
 * and no blocking timed the same; the guard is for machines without them.)
 */
const BLOCK = 128;

/**
 * Tile edges of the 2- and 1-byte kernels, in elements: one 64-byte line
 * per tile row. Measured on 1024², 1000², 64×16384 and 4096×256 views (u16:
 * 16 to 128, u8: 16 to 128): 32 and 64 were best or within noise of it.
 */
const TILE16 = 32;
const TILE8 = 64;

/** Scalar load and store of one element, by width in bytes. */
const SCALAR: Record<number, [string, string]> = {
  1: ["i32.load8_u", "i32.store8"],
  2: ["i32.load16_u", "i32.store16"],
  4: ["i32.load", "i32.store"],
  8: ["i64.load", "i64.store"],
};

/**
 * `$name_edge(d, da, s, sb, a0, a1, b0, b1)`: the scalar transpose of the
 * rectangle a0 ≤ a < a1, b0 ≤ b < b1 (the ragged edges of a blocked one).
 */
function edge(name: string, bytes: number): string {
  const [load, store] = SCALAR[bytes];
  return `
  (func $${name}_edge (param $d i32) (param $da i32) (param $s i32) (param $sb i32)
      (param $a0 i32) (param $a1 i32) (param $b0 i32) (param $b1 i32)
    (local $a i32) (local $b i32) (local $di i32) (local $si i32)
    (local.set $a (local.get $a0))
    (block $ea (loop $la
      (br_if $ea (i32.ge_s (local.get $a) (local.get $a1)))
      (local.set $di (i32.add (local.get $d)
        (i32.add (i32.mul (local.get $a) (local.get $da)) (i32.mul (local.get $b0) (i32.const ${bytes})))))
      (local.set $si (i32.add (local.get $s)
        (i32.add (i32.mul (local.get $a) (i32.const ${bytes})) (i32.mul (local.get $b0) (local.get $sb)))))
      (local.set $b (local.get $b0))
      (block $eb (loop $lb
        (br_if $eb (i32.ge_s (local.get $b) (local.get $b1)))
        (${store} (local.get $di) (${load} (local.get $si)))
        (local.set $di (i32.add (local.get $di) (i32.const ${bytes})))
        (local.set $si (i32.add (local.get $si) (local.get $sb)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $lb)))
      (local.set $a (i32.add (local.get $a) (i32.const 1)))
      (br $la))))`;
}

/**
 * The loops of a blocked transpose: BLOCK×BLOCK blocks of ta×tb tiles over
 * the whole q×q blocks (`$naq`, `$nbq`), `inTile` run for each tile (bounds
 * `$a0`..`$a1`, `$b0`..`$b1`), then the ragged edges through `$name_edge`:
 * columns b ≥ nbq for a < naq, then rows a ≥ naq.
 */
function tiles(
  name: string,
  q: number,
  ta: number,
  tb: number,
  inTile: string,
): string {
  return `
    (local.set $naq (i32.and (local.get $na) (i32.const ${-q})))
    (local.set $nbq (i32.and (local.get $nb) (i32.const ${-q})))
    (local.set $A0 (i32.const 0))
    (block $eA0 (loop $lA0
      (br_if $eA0 (i32.ge_s (local.get $A0) (local.get $naq)))
      (local.set $A1 (select (i32.add (local.get $A0) (i32.const ${BLOCK})) (local.get $naq)
        (i32.lt_s (i32.add (local.get $A0) (i32.const ${BLOCK})) (local.get $naq))))
    (local.set $B0 (i32.const 0))
    (block $eB0 (loop $lB0
      (br_if $eB0 (i32.ge_s (local.get $B0) (local.get $nbq)))
      (local.set $B1 (select (i32.add (local.get $B0) (i32.const ${BLOCK})) (local.get $nbq)
        (i32.lt_s (i32.add (local.get $B0) (i32.const ${BLOCK})) (local.get $nbq))))
    (local.set $a0 (local.get $A0))
    (block $ea0 (loop $la0
      (br_if $ea0 (i32.ge_s (local.get $a0) (local.get $A1)))
      (local.set $a1 (select (i32.add (local.get $a0) (i32.const ${ta})) (local.get $A1)
        (i32.lt_s (i32.add (local.get $a0) (i32.const ${ta})) (local.get $A1))))
      (local.set $b0 (local.get $B0))
      (block $eb0 (loop $lb0
        (br_if $eb0 (i32.ge_s (local.get $b0) (local.get $B1)))
        (local.set $b1 (select (i32.add (local.get $b0) (i32.const ${tb})) (local.get $B1)
          (i32.lt_s (i32.add (local.get $b0) (i32.const ${tb})) (local.get $B1))))${inTile}
        (local.set $b0 (local.get $b1))
        (br $lb0)))
      (local.set $a0 (local.get $a1))
      (br $la0)))
      (local.set $B0 (local.get $B1))
      (br $lB0)))
      (local.set $A0 (local.get $A1))
      (br $lA0)))
    (call $${name}_edge (local.get $d) (local.get $da) (local.get $s) (local.get $sb)
      (i32.const 0) (local.get $naq) (local.get $nbq) (local.get $nb))
    (call $${name}_edge (local.get $d) (local.get $da) (local.get $s) (local.get $sb)
      (local.get $naq) (local.get $na) (i32.const 0) (local.get $nb))`;
}

/**
 * Blocked transposes of 4- and 8-byte elements: 4×4 (or 2×2) blocks in
 * registers inside ta×tb tiles; full 4-byte tile rows run unrolled.
 */
function kernel(
  name: string,
  bytes: 4 | 8,
  ta: number = TILE,
  tb: number = TILE,
): string {
  const q = bytes === 4 ? 4 : 2; // block edge (elements per v128)
  const rows = Array.from({ length: q }, (_, k) => k);
  const lanes = (ids: number[]) =>
    ids.flatMap((l) => Array.from({ length: bytes }, (_, i) => l * bytes + i))
      .join(" ");
  let body: string;
  if (bytes === 4) {
    // r0..r3: src rows b..b+3 (4 consecutive a each); out_k: dst row a+k
    body = `
          (local.set $r0 (v128.load (local.get $si)))
          (local.set $r1 (v128.load (i32.add (local.get $si) (local.get $sb))))
          (local.set $r2 (v128.load (i32.add (local.get $si) (local.get $sb2))))
          (local.set $r3 (v128.load (i32.add (local.get $si) (local.get $sb3))))
          (local.set $t0 (i8x16.shuffle ${
      lanes([0, 4, 1, 5])
    } (local.get $r0) (local.get $r1)))
          (local.set $t1 (i8x16.shuffle ${
      lanes([2, 6, 3, 7])
    } (local.get $r0) (local.get $r1)))
          (local.set $t2 (i8x16.shuffle ${
      lanes([0, 4, 1, 5])
    } (local.get $r2) (local.get $r3)))
          (local.set $t3 (i8x16.shuffle ${
      lanes([2, 6, 3, 7])
    } (local.get $r2) (local.get $r3)))
          (v128.store (local.get $di) (i8x16.shuffle ${
      lanes([0, 1, 4, 5])
    } (local.get $t0) (local.get $t2)))
          (v128.store (i32.add (local.get $di) (local.get $da)) (i8x16.shuffle ${
      lanes([2, 3, 6, 7])
    } (local.get $t0) (local.get $t2)))
          (v128.store (i32.add (local.get $di) (local.get $da2)) (i8x16.shuffle ${
      lanes([0, 1, 4, 5])
    } (local.get $t1) (local.get $t3)))
          (v128.store (i32.add (local.get $di) (local.get $da3)) (i8x16.shuffle ${
      lanes([2, 3, 6, 7])
    } (local.get $t1) (local.get $t3)))`;
  } else {
    body = `
          (local.set $r0 (v128.load (local.get $si)))
          (local.set $r1 (v128.load (i32.add (local.get $si) (local.get $sb))))
          (v128.store (local.get $di) (i8x16.shuffle ${
      lanes([0, 2])
    } (local.get $r0) (local.get $r1)))
          (v128.store (i32.add (local.get $di) (local.get $da)) (i8x16.shuffle ${
      lanes([1, 3])
    } (local.get $r0) (local.get $r1)))`;
  }
  void rows;
  // inside a tile: 4-byte elements walk each destination row (b inner);
  // 8-byte elements walk each pair of source rows (a inner), which measured
  // 1.3× faster for f64 (more bytes per page visit on the source side)
  // a full 16-column tile row (the common case) runs unrolled: four 4×4
  // blocks with the destination rows' addresses kept in registers and the
  // column as an immediate offset, the source walked by one pointer
  // (1.3× faster in cache than the loop below, the same out of cache)
  let unrolled = "";
  for (let k = 0; k < tb / 4; k++) {
    unrolled += `
              (local.set $r0 (v128.load (local.get $si)))
              (local.set $si (i32.add (local.get $si) (local.get $sb)))
              (local.set $r1 (v128.load (local.get $si)))
              (local.set $si (i32.add (local.get $si) (local.get $sb)))
              (local.set $r2 (v128.load (local.get $si)))
              (local.set $si (i32.add (local.get $si) (local.get $sb)))
              (local.set $r3 (v128.load (local.get $si)))
              (local.set $si (i32.add (local.get $si) (local.get $sb)))
              (local.set $t0 (i8x16.shuffle ${
      lanes([0, 4, 1, 5])
    } (local.get $r0) (local.get $r1)))
              (local.set $t1 (i8x16.shuffle ${
      lanes([2, 6, 3, 7])
    } (local.get $r0) (local.get $r1)))
              (local.set $t2 (i8x16.shuffle ${
      lanes([0, 4, 1, 5])
    } (local.get $r2) (local.get $r3)))
              (local.set $t3 (i8x16.shuffle ${
      lanes([2, 6, 3, 7])
    } (local.get $r2) (local.get $r3)))
              (v128.store offset=${16 * k} (local.get $di) (i8x16.shuffle ${
      lanes([0, 1, 4, 5])
    } (local.get $t0) (local.get $t2)))
              (v128.store offset=${16 * k} (local.get $p1) (i8x16.shuffle ${
      lanes([2, 3, 6, 7])
    } (local.get $t0) (local.get $t2)))
              (v128.store offset=${16 * k} (local.get $p2) (i8x16.shuffle ${
      lanes([0, 1, 4, 5])
    } (local.get $t1) (local.get $t3)))
              (v128.store offset=${16 * k} (local.get $p3) (i8x16.shuffle ${
      lanes([2, 3, 6, 7])
    } (local.get $t1) (local.get $t3)))`;
  }
  const rowsOfDst = `
        (local.set $a (local.get $a0))
        (block $ea (loop $la
          (br_if $ea (i32.ge_s (local.get $a) (local.get $a1)))
          (local.set $di (i32.add (local.get $d)
            (i32.add (i32.mul (local.get $a) (local.get $da)) (i32.mul (local.get $b0) (i32.const ${bytes})))))
          (local.set $si (i32.add (local.get $s)
            (i32.add (i32.mul (local.get $a) (i32.const ${bytes})) (i32.mul (local.get $b0) (local.get $sb)))))
          (if (i32.eq (i32.sub (local.get $b1) (local.get $b0)) (i32.const ${tb}))
            (then
              (local.set $p1 (i32.add (local.get $di) (local.get $da)))
              (local.set $p2 (i32.add (local.get $di) (local.get $da2)))
              (local.set $p3 (i32.add (local.get $di) (local.get $da3)))${unrolled})
            (else
          (local.set $b (local.get $b0))
          (block $eb (loop $lb
            (br_if $eb (i32.ge_s (local.get $b) (local.get $b1)))${body}
            (local.set $di (i32.add (local.get $di) (i32.const ${q * bytes})))
            (local.set $si (i32.add (local.get $si) (i32.mul (local.get $sb) (i32.const ${q}))))
            (local.set $b (i32.add (local.get $b) (i32.const ${q})))
            (br $lb)))))
          (local.set $a (i32.add (local.get $a) (i32.const ${q})))
          (br $la)))`;
  const rowsOfSrc = `
        (local.set $b (local.get $b0))
        (block $eb (loop $lb
          (br_if $eb (i32.ge_s (local.get $b) (local.get $b1)))
          (local.set $di (i32.add (local.get $d)
            (i32.add (i32.mul (local.get $a0) (local.get $da)) (i32.mul (local.get $b) (i32.const ${bytes})))))
          (local.set $si (i32.add (local.get $s)
            (i32.add (i32.mul (local.get $a0) (i32.const ${bytes})) (i32.mul (local.get $b) (local.get $sb)))))
          (local.set $a (local.get $a0))
          (block $ea (loop $la
            (br_if $ea (i32.ge_s (local.get $a) (local.get $a1)))${body}
            (local.set $di (i32.add (local.get $di) (i32.mul (local.get $da) (i32.const ${q}))))
            (local.set $si (i32.add (local.get $si) (i32.const ${q * bytes})))
            (local.set $a (i32.add (local.get $a) (i32.const ${q})))
            (br $la)))
          (local.set $b (i32.add (local.get $b) (i32.const ${q})))
          (br $lb)))`;
  return `${edge(name, bytes)}

  (func (export "${name}") (param $d i32) (param $da i32) (param $s i32) (param $sb i32)
      (param $na i32) (param $nb i32)
    (local $A0 i32) (local $A1 i32) (local $B0 i32) (local $B1 i32)
    (local $naq i32) (local $nbq i32) (local $a0 i32) (local $b0 i32) (local $a1 i32) (local $b1 i32)
    (local $a i32) (local $b i32) (local $di i32) (local $si i32)
    (local $da2 i32) (local $da3 i32) (local $sb2 i32) (local $sb3 i32)
    (local $p1 i32) (local $p2 i32) (local $p3 i32)
    (local $r0 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128)
    (local $t0 v128) (local $t1 v128) (local $t2 v128) (local $t3 v128)
    (local.set $da2 (i32.shl (local.get $da) (i32.const 1)))
    (local.set $da3 (i32.add (local.get $da2) (local.get $da)))
    (local.set $sb2 (i32.shl (local.get $sb) (i32.const 1)))
    (local.set $sb3 (i32.add (local.get $sb2) (local.get $sb)))${
    tiles(name, q, ta, tb, bytes === 4 ? rowsOfDst : rowsOfSrc)
  })`;
}

/**
 * Byte lanes of the unpack that interleaves units of `u` bytes from the low
 * (or high) halves of two vectors: `punpckl*` / `punpckh*` on x86, `zip1` /
 * `zip2` on Arm, which V8 recognises in an `i8x16.shuffle`.
 */
function unpack(u: number, high: boolean): string {
  const ids: number[] = [];
  const at = high ? 8 : 0;
  for (let k = 0; k < 8 / u; k++) {
    for (let i = 0; i < u; i++) ids.push(at + k * u + i);
    for (let i = 0; i < u; i++) ids.push(16 + at + k * u + i);
  }
  return ids.join(" ");
}

/**
 * Blocked transposes of 1- and 2-byte elements (same signature and layout
 * as `kernel`): q×q blocks (q = 16 / bytes) transposed in registers by
 * log2(q) rounds of unpacks, each round pairing vectors `p` apart and
 * interleaving units of `p` elements (for q = 4 this is the 4-byte kernel's
 * network), inside ta×tb tiles, inside BLOCK×BLOCK blocks; ragged edges are
 * scalar.
 */
function smallKernel(
  name: string,
  bytes: 1 | 2,
  ta: number,
  tb: number,
): string {
  const q = 16 / bytes;
  const v = (set: string, i: number) => `$${set}${i}`;
  let body = `
            (local.set $p (local.get $si))`;
  for (let j = 0; j < q; j++) {
    body += `
            (local.set ${v("v", j)} (v128.load (local.get $p)))`;
    if (j < q - 1) {
      body += `
            (local.set $p (i32.add (local.get $p) (local.get $sb)))`;
    }
  }
  let from = "v", to = "w";
  for (let p = 1; p < q; p *= 2) {
    const last = p * 2 === q;
    const u = p * bytes;
    for (let g = 0; g < q; g += 2 * p) {
      for (let j = 0; j < p; j++) {
        const x = `(local.get ${v(from, g + j)})`;
        const y = `(local.get ${v(from, g + j + p)})`;
        for (const high of [false, true]) {
          const out = g + 2 * j + (high ? 1 : 0);
          const value = `(i8x16.shuffle ${unpack(u, high)} ${x} ${y})`;
          if (!last) {
            body += `
            (local.set ${v(to, out)} ${value})`;
          } else {
            // the last round stores dst row a + out at column b
            body += `
            (v128.store (i32.add (local.get $di) (local.get ${
              v("o", out)
            })) ${value})`;
          }
        }
      }
    }
    [from, to] = [to, from];
  }
  const vectors = Array.from(
    { length: q },
    (_, i) => `(local ${v("v", i)} v128) (local ${v("w", i)} v128)`,
  ).join(" ");
  const offsets = Array.from(
    { length: q },
    (_, i) => `(local ${v("o", i)} i32)`,
  )
    .join(" ");
  const setOffsets = Array.from(
    { length: q },
    (_, i) =>
      `(local.set ${v("o", i)} (i32.mul (local.get $da) (i32.const ${i})))`,
  ).join("\n    ");
  const inTile = `
        (local.set $a (local.get $a0))
        (block $ea (loop $la
          (br_if $ea (i32.ge_s (local.get $a) (local.get $a1)))
          (local.set $di (i32.add (local.get $d)
            (i32.add (i32.mul (local.get $a) (local.get $da)) (i32.mul (local.get $b0) (i32.const ${bytes})))))
          (local.set $si (i32.add (local.get $s)
            (i32.add (i32.mul (local.get $a) (i32.const ${bytes})) (i32.mul (local.get $b0) (local.get $sb)))))
          (local.set $b (local.get $b0))
          (block $eb (loop $lb
            (br_if $eb (i32.ge_s (local.get $b) (local.get $b1)))${body}
            (local.set $di (i32.add (local.get $di) (i32.const 16)))
            (local.set $si (i32.add (local.get $p) (local.get $sb)))
            (local.set $b (i32.add (local.get $b) (i32.const ${q})))
            (br $lb)))
          (local.set $a (i32.add (local.get $a) (i32.const ${q})))
          (br $la)))`;
  return `${edge(name, bytes)}

  (func (export "${name}") (param $d i32) (param $da i32) (param $s i32) (param $sb i32)
      (param $na i32) (param $nb i32)
    (local $A0 i32) (local $A1 i32) (local $B0 i32) (local $B1 i32)
    (local $naq i32) (local $nbq i32) (local $a0 i32) (local $b0 i32) (local $a1 i32) (local $b1 i32)
    (local $a i32) (local $b i32) (local $di i32) (local $si i32) (local $p i32)
    ${offsets}
    ${vectors}
    ${setOffsets}${tiles(name, q, ta, tb, inTile)})`;
}

/**
 * rows(d, ds, s, ss, len, n): n runs of len bytes, each with memory.copy;
 * the per-run cost is a few instructions instead of a JS builtin call.
 */
const rows = `
  (func (export "rows") (param $d i32) (param $ds i32) (param $s i32) (param $ss i32)
      (param $len i32) (param $n i32)
    (block $e (loop $l
      (br_if $e (i32.le_s (local.get $n) (i32.const 0)))
      (memory.copy (local.get $d) (local.get $s) (local.get $len))
      (local.set $d (i32.add (local.get $d) (local.get $ds)))
      (local.set $s (i32.add (local.get $s) (local.get $ss)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br $l))))`;

/**
 * gN(d, ds, s, ss, sb, nb, n): n rows of nb elements of N bytes, the source
 * strided by sb bytes within a row, the destination dense within a row.
 */
function gather(name: string, bytes: 1 | 2 | 4 | 8): string {
  const [load, store] = SCALAR[bytes];
  return `
  (func (export "${name}") (param $d i32) (param $ds i32) (param $s i32) (param $ss i32)
      (param $sb i32) (param $nb i32) (param $n i32)
    (local $di i32) (local $si i32) (local $end i32)
    (block $e (loop $l
      (br_if $e (i32.le_s (local.get $n) (i32.const 0)))
      (local.set $di (local.get $d))
      (local.set $si (local.get $s))
      (local.set $end (i32.add (local.get $d) (i32.mul (local.get $nb) (i32.const ${bytes}))))
      (block $eb (loop $lb
        (br_if $eb (i32.ge_u (local.get $di) (local.get $end)))
        (${store} (local.get $di) (${load} (local.get $si)))
        (local.set $di (i32.add (local.get $di) (i32.const ${bytes})))
        (local.set $si (i32.add (local.get $si) (local.get $sb)))
        (br $lb)))
      (local.set $d (i32.add (local.get $d) (local.get $ds)))
      (local.set $s (i32.add (local.get $s) (local.get $ss)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br $l))))`;
}

const wat = `(module
  (import "env" "memory" (memory 1))
${kernel("t32", 4)}
${kernel("t64", 8)}
${smallKernel("t16", 2, TILE16, TILE16)}
${smallKernel("t8", 1, TILE8, TILE8)}
${rows}
${gather("g8", 1)}
${gather("g16", 2)}
${gather("g32", 4)}
${gather("g64", 8)}
)`;

/**
 * The same transposes reading memory 0 (the caller's) and writing memory 1
 * (the module's own scratch, where a chunk of output stays in cache), and
 * `out(d, s, len)` copying a chunk from the scratch to memory 0: staged
 * output without copying the source first. Needs the multi-memory proposal
 * (V8 12+); the loader checks `WebAssembly.validate` and falls back.
 */
function twoMemories(text: string): string {
  return text
    .replaceAll("(v128.load ", "(v128.load $m0 ")
    .replaceAll("(i32.load ", "(i32.load $m0 ")
    .replaceAll("(i64.load ", "(i64.load $m0 ")
    .replaceAll("(i32.load8_u ", "(i32.load8_u $m0 ")
    .replaceAll("(i32.load16_u ", "(i32.load16_u $m0 ")
    .replaceAll("(i32.store8 ", "(i32.store8 $m1 ")
    .replaceAll("(i32.store16 ", "(i32.store16 $m1 ")
    .replaceAll("(v128.store ", "(v128.store $m1 ")
    .replaceAll("(i32.store ", "(i32.store $m1 ")
    .replaceAll("(i64.store ", "(i64.store $m1 ");
}

const watStaged = `(module
  (import "env" "memory" (memory $m0 1))
  (import "env" "scratch" (memory $m1 1))
${twoMemories(kernel("t32", 4))}
${twoMemories(kernel("t64", 8))}
${twoMemories(kernel("t32w", 4, 32, 8))}
${twoMemories(smallKernel("t16", 2, TILE16, TILE16))}
${twoMemories(smallKernel("t8", 1, TILE8, TILE8))}
  (func (export "out") (param $d i32) (param $s i32) (param $len i32)
    (memory.copy $m0 $m1 (local.get $d) (local.get $s) (local.get $len)))
  (func (export "outRows") (param $d i32) (param $ds i32) (param $s i32)
      (param $ss i32) (param $len i32) (param $n i32)
    (block $e (loop $l
      (br_if $e (i32.le_s (local.get $n) (i32.const 0)))
      (memory.copy $m0 $m1 (local.get $d) (local.get $s) (local.get $len))
      (local.set $d (i32.add (local.get $d) (local.get $ds)))
      (local.set $s (i32.add (local.get $s) (local.get $ss)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br $l)))))`;

const wabt = await initWabt();
const parsed = wabt.parseWat("transpose.wat", wat, {
  simd: true,
  bulk_memory: true,
});
parsed.validate();
const { buffer } = parsed.toBinary({});
const b64 = btoa(String.fromCharCode(...buffer));
// wabt parses the second memory with `multi_memory` (missing from its
// type declarations, hence the variable) but its validator rejects it, so
// V8 validates the module instead
const stagedFeatures = { simd: true, bulk_memory: true, multi_memory: true };
const staged = wabt.parseWat("transpose_staged.wat", watStaged, stagedFeatures)
  .toBinary({}).buffer as Uint8Array<ArrayBuffer>;
if (!WebAssembly.validate(staged)) {
  throw new Error("the two-memory module does not validate in this runtime");
}
const b64Staged = btoa(String.fromCharCode(...staged));
const out =
  `// Generated by _tools/build_wasm.ts; do not edit. ${buffer.length} + ${staged.length} bytes.
// WebAssembly modules: blocked SIMD transposes t32 and t64, a run copier and
// strided row gathers over an imported memory; and the same transposes from
// one memory into a second (staged output), with a copy back (WAT in
// _tools/build_wasm.ts).

/** The module bytes, base64. */
export const _TRANSPOSE_WASM =
  "${b64}";

/** The two-memory module (multi-memory proposal), base64. */
export const _TRANSPOSE_STAGED_WASM =
  "${b64Staged}";
`;
await Deno.writeTextFile(
  new URL("../_transpose_wasm.ts", import.meta.url),
  out,
);
console.log(
  `wrote _transpose_wasm.ts (${buffer.length} + ${staged.length} bytes)`,
);
