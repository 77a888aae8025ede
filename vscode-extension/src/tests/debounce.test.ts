/** debounce.ts: which inline completion requests reach the server, and when. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Cancellation, Debouncer, requestPlan } from '../debounce';

/** A cancellation token that the test cancels by hand. */
class Token implements Cancellation {
  isCancellationRequested = false;
  private listeners: (() => void)[] = [];

  onCancellationRequested(listener: () => void) {
    this.listeners.push(listener);
    return { dispose: () => { this.listeners = this.listeners.filter((l) => l !== listener); } };
  }

  cancel(): void {
    this.isCancellationRequested = true;
    this.listeners.forEach((listener) => listener());
  }

  get listening(): number {
    return this.listeners.length;
  }
}

test('plan: automatic requests wait the debounce, or are not sent when off; explicit ones go at once', () => {
  assert.deepEqual(requestPlan(true, 150, false), { ask: true, delayMs: 150 });
  assert.deepEqual(requestPlan(false, 150, false), { ask: false, delayMs: 0 });
  assert.deepEqual(requestPlan(true, 150, true), { ask: true, delayMs: 0 });
  assert.deepEqual(requestPlan(false, 150, true), { ask: true, delayMs: 0 });
});

test('a wait nobody interrupts passes, and lets go of its token', async () => {
  const token = new Token();
  assert.equal(await new Debouncer().wait(5, token), true);
  assert.equal(token.listening, 0);
});

test('a newer wait drops the older one at once', async () => {
  const debouncer = new Debouncer();
  const older = new Token();
  const first = debouncer.wait(10_000, older);  // would time the test out if it were not dropped
  const second = debouncer.wait(1, new Token());
  assert.equal(await first, false);
  assert.equal(await second, true);
  assert.equal(older.listening, 0);
});

test('cancelling the token ends the wait with false', async () => {
  const token = new Token();
  const waiting = new Debouncer().wait(10_000, token);
  token.cancel();
  assert.equal(await waiting, false);
});

test('an already cancelled token never waits', async () => {
  const token = new Token();
  token.cancel();
  assert.equal(await new Debouncer().wait(10_000, token), false);
  assert.equal(token.listening, 0);
});

test('after a wait ends, the next one is not affected by it', async () => {
  const debouncer = new Debouncer();
  assert.equal(await debouncer.wait(0, new Token()), true);
  assert.equal(await debouncer.wait(0, new Token()), true);
});
