// The highest of the last N step peaks, kept as steps end (a ring of the
// peaks and the running maximum, rescanned only when the maximum leaves):
// a step's end and a segment's making read it without a scan.

/** The highest of the last `size` values pushed. */
export class _PeakWindow {
  #ring: Float64Array;
  #next = 0;
  #count = 0;
  #max = 0;

  /** @param size Values kept (at least 1). */
  constructor(size: number) {
    this.#ring = new Float64Array(size);
  }

  /** The highest value kept (0 when none). */
  get max(): number {
    return this.#max;
  }

  /** Keeps `value`; the oldest goes once `size` are kept. */
  push(value: number): void {
    const ring = this.#ring;
    const out = this.#count === ring.length ? ring[this.#next] : -Infinity;
    ring[this.#next] = value;
    this.#next = this.#next + 1 === ring.length ? 0 : this.#next + 1;
    if (this.#count < ring.length) this.#count++;
    if (value >= this.#max) this.#max = value;
    else if (out === this.#max) {
      let max = 0;
      for (let i = 0; i < this.#count; i++) if (ring[i] > max) max = ring[i];
      this.#max = max;
    }
  }
}
