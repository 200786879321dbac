/**
 * Test-only: Workers running `_test_figures_worker.ts`, one report per
 * command, for the tests of `SharedHeap.stats()` figures over real Workers.
 *
 * Not exported from `mod.ts`; excluded from publish (`**\/_test_*.ts`).
 *
 * @module
 */

import type { FiguresCommand, FiguresReport } from "./_test_figures_worker.ts";

/** Workers that answer each command with one report. */
export class Crew {
  /** The Workers, in the order they were started. */
  readonly workers: Worker[] = [];

  /**
   * Starts `n` Workers.
   *
   * @param n How many.
   */
  constructor(n: number) {
    for (let i = 0; i < n; i++) {
      this.workers.push(
        new Worker(new URL("./_test_figures_worker.ts", import.meta.url), {
          type: "module",
        }),
      );
    }
  }

  /**
   * Sends Worker `i` a command.
   *
   * @param i The Worker's index.
   * @param c The command.
   * @returns Its report; rejects with the Worker's error.
   */
  ask(i: number, c: FiguresCommand): Promise<FiguresReport> {
    const w = this.workers[i];
    return new Promise((resolve, reject) => {
      w.onmessage = (e: MessageEvent<FiguresReport>) => {
        if (e.data.error) reject(new Error(`worker ${i}: ${e.data.error}`));
        else resolve(e.data);
      };
      w.onerror = (e) => {
        e.preventDefault();
        reject(new Error(`worker ${i}: ${e.message}`));
      };
      w.postMessage(c);
    });
  }

  /**
   * Sends every Worker the same command.
   *
   * @param c The command.
   * @returns Their reports, in Worker order.
   */
  all(c: FiguresCommand): Promise<FiguresReport[]> {
    return Promise.all(this.workers.map((_, i) => this.ask(i, c)));
  }

  /** Stops every Worker. */
  close(): void {
    for (const w of this.workers) w.terminate();
  }
}
