/**
 * The options half of the contract: every numeric option of every
 * allocator's constructor refuses hostile values with a typed error that
 * names the value, `null` included (the library-wide rule: an option that is
 * absent or `undefined` takes its default; `null` is a value, and refused
 * where the option is not nullable), and each option is read once (a getter
 * that changes between reads cannot slip a second value past validation).
 *
 * @module
 */

import assert from "node:assert/strict";
import { assertInvalidArgument, hostileNumbers } from "./_contract.ts";

/** One numeric option of one constructor. */
export interface OptionCase {
  /** `Class.option`, for messages. */
  readonly name: string;
  /** A value the option takes. */
  readonly valid: unknown;
  /** Hostile values the option takes (`Infinity` for "no limit"). */
  readonly accepts?: readonly unknown[];
  /** The hostile values to try (default: the numeric list). */
  readonly hostile?: readonly { label: string; value: unknown }[];
  /** Constructs with `options` (the option under test and nothing else). */
  make(options: Record<string, unknown>): { close?(): void } | void;
}

/** The option's key: the part of the name after the last dot. */
function keyOf(c: OptionCase): string {
  return c.name.slice(c.name.lastIndexOf(".") + 1);
}

/** Registers the options tests of a list of cases. */
export function optionConformance(
  label: string,
  cases: readonly OptionCase[],
): void {
  Deno.test(`${label}: options refuse hostile values, null included`, () => {
    const failures: string[] = [];
    for (const c of cases) {
      const key = keyOf(c);
      for (const { label: v, value } of c.hostile ?? hostileNumbers()) {
        if (value === undefined || c.accepts?.includes(value)) continue;
        let error: unknown;
        try {
          const made = c.make({ [key]: value });
          if (made && made.close) made.close();
        } catch (e) {
          error = e;
        }
        try {
          assertInvalidArgument(error, value, `${c.name}: ${v}`);
        } catch (e) {
          failures.push((e as Error).message);
        }
      }
    }
    assert.deepEqual(failures, [], failures.join("\n"));
  });

  Deno.test(`${label}: each option is read once`, () => {
    const failures: string[] = [];
    for (const c of cases) {
      const key = keyOf(c);
      let reads = 0;
      const options = {
        get [key]() {
          reads++;
          return c.valid;
        },
      };
      const made = c.make(options);
      if (made && made.close) made.close();
      if (reads !== 1) failures.push(`${c.name}: read ${reads} times`);
    }
    assert.deepEqual(failures, [], failures.join("\n"));
  });

  Deno.test(`${label}: an option whose getter throws stops the constructor with that error`, () => {
    const failures: string[] = [];
    for (const c of cases) {
      const key = keyOf(c);
      const boom = new Error(`getter of ${key} (injected)`);
      const options = {
        get [key](): unknown {
          throw boom;
        },
      };
      try {
        const made = c.make(options);
        if (made && made.close) made.close();
        failures.push(`${c.name}: made, the getter's error swallowed`);
      } catch (e) {
        if (e !== boom) failures.push(`${c.name}: threw ${e}, not the error`);
      }
    }
    assert.deepEqual(failures, [], failures.join("\n"));
  });
}
