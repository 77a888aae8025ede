/** reask.ts: an as-you-type request answered empty before the model loaded is asked again once. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Place, ReAsk, isEmptyAnswer, samePlace } from '../reask';
import { ServerStatus } from '../status';

const AT: Place = { uri: 'file:///shapes.py', version: 7, line: 11, character: 11 };
const loading: ServerStatus = { state: 'busy', message: 'loading the shipped model', model: null, pythonVersion: null };
const ready: ServerStatus = { state: 'idle', message: 'ready: default_model', model: 'default_model', pythonVersion: null };
const completing: ServerStatus = { state: 'busy', message: 'completing shapes.py', model: 'default_model', pythonVersion: null };
const failed: ServerStatus = { state: 'error', message: 'model failed to load', model: null, pythonVersion: null };

test('an empty answer while the model loads: asked again once, when the server says ready', () => {
  const reAsk = new ReAsk();
  assert.equal(reAsk.status(loading), undefined);
  reAsk.answered(AT, true);
  assert.deepEqual(reAsk.status(ready), AT);
  assert.equal(reAsk.status(ready), undefined, 'only once');
});

test('an empty answer before any status counts as one before the model loaded', () => {
  const reAsk = new ReAsk();
  reAsk.answered(AT, true);
  assert.deepEqual(reAsk.status(ready), AT);
});

test('not while a completion runs: the idle status after it hands the place back', () => {
  const reAsk = new ReAsk();
  reAsk.status(loading);
  reAsk.answered(AT, true);
  assert.equal(reAsk.status(completing), undefined);
  assert.deepEqual(reAsk.status(ready), AT);
});

test('nothing to ask again after an answer with items, or an empty one from a loaded model', () => {
  const withItems = new ReAsk();
  withItems.status(loading);
  withItems.answered(AT, false);
  assert.equal(withItems.status(ready), undefined);

  const loaded = new ReAsk();
  loaded.status(ready);
  loaded.answered(AT, true);  // the model had nothing to offer: asking again would get the same
  loaded.status(completing);
  assert.equal(loaded.status(ready), undefined);
});

test('the latest answer decides: a later one with items forgets the earlier place', () => {
  const reAsk = new ReAsk();
  reAsk.status(loading);
  reAsk.answered(AT, true);
  reAsk.answered({ ...AT, version: 8 }, false);
  assert.equal(reAsk.status(ready), undefined);
});

test('a model that failed to load asks nothing again', () => {
  const reAsk = new ReAsk();
  reAsk.status(loading);
  reAsk.answered(AT, true);
  assert.equal(reAsk.status(failed), undefined);
});

test('the same place: the same document, version and cursor', () => {
  assert.ok(samePlace(AT, { ...AT }));
  assert.ok(!samePlace(AT, { ...AT, version: 8 }));
  assert.ok(!samePlace(AT, { ...AT, character: 12 }));
  assert.ok(!samePlace(AT, { ...AT, line: 10 }));
  assert.ok(!samePlace(AT, { ...AT, uri: 'file:///other.py' }));
});

test('empty answers: nothing, no list, an empty list', () => {
  for (const empty of [undefined, null, [], { items: [] }]) {
    assert.ok(isEmptyAnswer(empty), JSON.stringify(empty));
  }
  assert.ok(!isEmptyAnswer([{ insertText: 'width' }]));
  assert.ok(!isEmptyAnswer({ items: [{ insertText: 'width' }] }));
});
