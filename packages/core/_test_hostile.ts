/**
 * Test-only: hostile values and a helper that feeds them to a public entry
 * point, expecting a typed allot error and no change of observable state.
 *
 * Shared by the adversarial tests of every package. Not exported from
 * `mod.ts` and excluded from publish (`**\/_test_*.ts`); other packages'
 * tests import it by relative path (`../core/_test_hostile.ts`), which keeps
 * the layering (core depends on nothing).
 *
 * @module
 */

import assert from "node:assert/strict";
import { AllotError } from "./errors.ts";

/** A named hostile value. */
export interface Hostile {
  /** Short name shown in failure messages. */
  readonly name: string;
  /** The value passed to the entry point. */
  readonly value: unknown;
}

/** Thrown by the traps of {@linkcode trapObject}; never a typed error. */
export class HostileTrapError extends Error {
  constructor(what: string) {
    super(`Hostile trap: ${what} was called`);
    this.name = "HostileTrapError";
  }
}

/**
 * An object whose `valueOf`, `toString`, `Symbol.toPrimitive` and every
 * other property read throw {@linkcode HostileTrapError}: code that coerces
 * it or reads a field of it before validating crashes with an untyped error.
 */
export function trapObject(): object {
  return new Proxy(Object.create(null), {
    get(_target, key) {
      throw new HostileTrapError(`get ${String(key)}`);
    },
    has(_target, key) {
      throw new HostileTrapError(`has ${String(key)}`);
    },
    ownKeys() {
      throw new HostileTrapError("ownKeys");
    },
    getPrototypeOf() {
      throw new HostileTrapError("getPrototypeOf");
    },
  });
}

/** An object with one throwing getter named `key`, and `valueOf` throwing. */
export function throwingGetter(key: string): object {
  return {
    get [key](): never {
      throw new HostileTrapError(`getter ${key}`);
    },
    valueOf(): never {
      throw new HostileTrapError("valueOf");
    },
  };
}

/**
 * Values that are not a non-negative safe integer (or that are, but
 * dangerously large): for sizes, offsets, lengths, counts and indices.
 */
export function hostileNumbers(): Hostile[] {
  return [
    { name: "NaN", value: NaN },
    { name: "Infinity", value: Infinity },
    { name: "-Infinity", value: -Infinity },
    { name: "-1", value: -1 },
    { name: "-2^53", value: -(2 ** 53) },
    { name: "0.5", value: 0.5 },
    { name: "1.5", value: 1.5 },
    { name: "2^53", value: 2 ** 53 },
    { name: "2^53+2", value: 2 ** 53 + 2 },
    { name: "1e308", value: 1e308 },
    { name: "8n", value: 8n },
    { name: "2n**64n", value: 2n ** 64n },
    { name: "null", value: null },
    { name: "undefined", value: undefined },
    { name: '"8"', value: "8" },
    { name: '""', value: "" },
    { name: '"abc"', value: "abc" },
    { name: "true", value: true },
    { name: "Symbol()", value: Symbol("hostile") },
    { name: "[8]", value: [8] },
    { name: "{}", value: {} },
    { name: "new Number(8)", value: new Number(8) },
    { name: "throwing valueOf", value: throwingGetter("x") },
    { name: "trap proxy", value: trapObject() },
    { name: "() => 8", value: () => 8 },
  ];
}

/**
 * Hostile values for a parameter that expects an object (options, a handle,
 * an array): primitives, traps and look-alikes.
 */
export function hostileObjects(): Hostile[] {
  return [
    { name: "null", value: null },
    { name: "undefined", value: undefined },
    { name: "0", value: 0 },
    { name: "NaN", value: NaN },
    { name: "8n", value: 8n },
    { name: '"abc"', value: "abc" },
    { name: "true", value: true },
    { name: "Symbol()", value: Symbol("hostile") },
    { name: "{}", value: {} },
    { name: "[]", value: [] },
    { name: "trap proxy", value: trapObject() },
    { name: "() => {}", value: () => {} },
  ];
}

/** Handles that belong elsewhere, built by the test for its target. */
export interface HandleSources {
  /** A handle from another instance of the same class. */
  otherInstance?: () => unknown;
  /** A handle this instance made and already released. */
  stale?: () => unknown;
  /** A handle of a different kind altogether (another package's). */
  foreign?: () => unknown;
  /** A structural look-alike (same fields, never handed out). */
  lookalike?: () => unknown;
}

/**
 * Hostile handles: {@linkcode hostileObjects} plus the foreign, stale and
 * other-instance handles the test builds. The builders run now, so state
 * they create exists before the test's first snapshot.
 */
export function hostileHandles(sources: HandleSources): Hostile[] {
  const out = hostileObjects();
  if (sources.otherInstance) {
    out.push({ name: "other instance's", value: sources.otherInstance() });
  }
  if (sources.stale) out.push({ name: "stale", value: sources.stale() });
  if (sources.foreign) out.push({ name: "foreign", value: sources.foreign() });
  if (sources.lookalike) {
    out.push({ name: "look-alike", value: sources.lookalike() });
  }
  return out;
}

/** -0: a valid zero everywhere a non-negative integer is expected. */
export const NEGATIVE_ZERO = -0;

/** Type of an allot error class, for {@linkcode RefuseOptions.error}. */
// deno-lint-ignore no-explicit-any
export type ErrorClass = abstract new (...args: any[]) => Error;

/** Options of {@linkcode assertRefusesAll}. */
export interface RefuseOptions<S> {
  /** The observable state of the target; compared before and after. */
  snapshot?: () => S;
  /** Expected error class (default: any {@linkcode AllotError}). */
  error?: ErrorClass;
  /** Values to skip (by name), when the entry point rightly accepts them. */
  skip?: readonly string[];
}

/** What {@linkcode assertRefusesAll} tried, for reports. */
export interface RefuseReport {
  /** Number of hostile calls made. */
  calls: number;
}

function check<S>(
  label: string,
  hostile: Hostile,
  outcome: { threw: boolean; error?: unknown },
  before: S | undefined,
  options: RefuseOptions<S>,
): void {
  const what = `${label} with ${hostile.name}`;
  if (!outcome.threw) assert.fail(`${what} was accepted`);
  const expected = options.error ?? AllotError;
  const error = outcome.error;
  // User code that throws (a trap, a throwing getter) may propagate its own
  // error: allot does not swallow it. It must not leave a crash of allot's
  // own (TypeError) or changed state behind.
  if (error instanceof HostileTrapError) {
    if (options.snapshot !== undefined) {
      assert.deepStrictEqual(
        options.snapshot(),
        before,
        `${what} threw the value's own error but changed state`,
      );
    }
    return;
  }
  if (!(error instanceof expected)) {
    assert.fail(
      `${what} threw ${
        error instanceof Error ? `${error.name}: ${error.message}` : error
      }, expected ${expected.name}`,
    );
  }
  if (!(error instanceof AllotError)) {
    assert.fail(`${what} threw ${(error as Error).name}, not an AllotError`);
  }
  if (options.snapshot !== undefined) {
    assert.deepStrictEqual(
      options.snapshot(),
      before,
      `${what} was refused but changed state`,
    );
  }
}

/**
 * Calls `call` once with each hostile value, and asserts each call throws a
 * typed allot error (an {@linkcode AllotError}, or `options.error`) and
 * leaves `options.snapshot()` deep-equal to what it was before.
 *
 * @param label Entry point name, for failure messages.
 * @param values The hostile values.
 * @param call Calls the entry point with one value.
 * @param options Snapshot, expected error class, values to skip.
 * @returns How many calls were made.
 */
export function assertRefusesAll<S>(
  label: string,
  values: readonly Hostile[],
  call: (value: unknown) => unknown,
  options: RefuseOptions<S> = {},
): RefuseReport {
  let calls = 0;
  for (const hostile of values) {
    if (options.skip?.includes(hostile.name)) continue;
    const before = options.snapshot?.();
    let outcome: { threw: boolean; error?: unknown };
    try {
      call(hostile.value);
      outcome = { threw: false };
    } catch (error) {
      outcome = { threw: true, error };
    }
    calls++;
    check(label, hostile, outcome, before, options);
  }
  return { calls };
}

/** {@linkcode assertRefusesAll} for entry points that return a promise. */
export async function assertRejectsAll<S>(
  label: string,
  values: readonly Hostile[],
  call: (value: unknown) => unknown,
  options: RefuseOptions<S> = {},
): Promise<RefuseReport> {
  let calls = 0;
  for (const hostile of values) {
    if (options.skip?.includes(hostile.name)) continue;
    const before = options.snapshot?.();
    let outcome: { threw: boolean; error?: unknown };
    try {
      await call(hostile.value);
      outcome = { threw: false };
    } catch (error) {
      outcome = { threw: true, error };
    }
    calls++;
    check(label, hostile, outcome, before, options);
  }
  return { calls };
}

/**
 * Asserts one call is refused with a typed error and changes nothing.
 *
 * @param label What was called, for failure messages.
 * @param call The call.
 * @param options Snapshot and expected error class.
 */
export function assertRefused<S>(
  label: string,
  call: () => unknown,
  options: RefuseOptions<S> = {},
): void {
  assertRefusesAll(
    label,
    [{ name: "(fixed)", value: undefined }],
    call,
    options,
  );
}

/** {@linkcode hostileObjects} without the named ones (rightly accepted). */
export function hostileObjectsBut(...names: string[]): Hostile[] {
  return hostileObjects().filter((h) => !names.includes(h.name));
}

/** {@linkcode hostileNumbers} without the named ones (rightly accepted). */
export function hostileNumbersBut(...names: string[]): Hostile[] {
  return hostileNumbers().filter((h) => !names.includes(h.name));
}

/**
 * Values a boolean option must refuse: every hostile number but `undefined`
 * (the default) and `true`, and look-alikes that are truthy or falsy (`1`,
 * `0`, `"yes"`, `"false"`, a boxed `Boolean`), which must not switch a mode on
 * or off by accident.
 */
export function hostileFlags(): Hostile[] {
  return [
    ...hostileNumbersBut("undefined", "true"),
    { name: "1", value: 1 },
    { name: "0", value: 0 },
    { name: '"yes"', value: "yes" },
    { name: '"false"', value: "false" },
    { name: "new Boolean(true)", value: new Boolean(true) },
  ];
}

/** Running total of hostile calls made by a test module, for reports. */
export class HostileTally {
  #calls = 0;
  #entryPoints = new Set<string>();

  /**
   * {@linkcode assertRefusesAll}, counted under `label`. An arrow property,
   * so `const { refuse } = tally` works.
   */
  readonly refuse = <S>(
    label: string,
    values: readonly Hostile[],
    call: (value: unknown) => unknown,
    options: RefuseOptions<S> = {},
  ): void => {
    this.add(label, assertRefusesAll(label, values, call, options));
  };

  /** Adds a report for one entry point. */
  add(entryPoint: string, report: RefuseReport): void {
    this.#entryPoints.add(entryPoint);
    this.#calls += report.calls;
  }

  /** Number of hostile calls made. */
  get calls(): number {
    return this.#calls;
  }

  /** Number of distinct entry points covered. */
  get entryPoints(): number {
    return this.#entryPoints.size;
  }
}
