/** cursor.ts: the server is told where the cursor rests, not where typing moved it. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CursorReporter, cursorParams } from '../cursor';
import { Place } from '../reask';

const AT: Place = { uri: 'file:///shapes.py', version: 3, line: 4, character: 8 };
const rest = (ms = 30) => new Promise((resolve) => setTimeout(resolve, ms));

function reporter(): { said: Place[]; cursors: CursorReporter } {
  const said: Place[] = [];
  return { said, cursors: new CursorReporter((place) => said.push(place), 10) };
}

test('a cursor that rests is said once, with the params the server reads', async () => {
  const { said, cursors } = reporter();
  cursors.moved(AT, true);
  await rest();
  cursors.moved(AT);
  await rest();
  assert.deepEqual(said, [AT]);
  assert.deepEqual(cursorParams(AT), { textDocument: { uri: AT.uri }, position: { line: 4, character: 8 } });
});

test('only where the cursor stops: moves in quick succession say the last', async () => {
  const { said, cursors } = reporter();
  cursors.moved(AT, true);
  cursors.moved({ ...AT, line: 5 });
  cursors.moved({ ...AT, line: 6 });
  await rest();
  assert.deepEqual(said, [{ ...AT, line: 6 }]);
});

test('not a move that typing made (the document changed): a request follows it anyway', async () => {
  const { said, cursors } = reporter();
  cursors.moved(AT, true);
  await rest();
  cursors.moved({ ...AT, version: 4, character: 9 });
  await rest();
  cursors.moved({ ...AT, version: 4, line: 9 });  // then a click, at that version
  await rest();
  assert.deepEqual(said, [AT, { ...AT, version: 4, line: 9 }]);
});

test('nothing without a cursor; nothing after dispose', async () => {
  const { said, cursors } = reporter();
  cursors.moved(undefined);
  cursors.moved(AT, true);
  cursors.dispose();
  await rest();
  assert.deepEqual(said, []);
});

test('a document closed and opened again is said again', async () => {
  const { said, cursors } = reporter();
  cursors.moved(AT, true);
  await rest();
  cursors.closed(AT.uri);
  cursors.moved(AT, true);
  await rest();
  assert.deepEqual(said, [AT, AT]);
});
