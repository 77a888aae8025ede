/** modelGet.ts: the command line it runs and what it shows of the progress. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CODE_MODEL, modelGetArgs, progressLine } from '../modelGet';

test('it runs fimconstrain model get with the model auto prefers', () => {
  assert.deepEqual(modelGetArgs(), ['-m', 'fimconstrain', 'model', 'get', CODE_MODEL]);
  assert.equal(CODE_MODEL, 'qwen2.5-coder-0.5b');
});

test('the progress shown is the last line a bar or a message drew', () => {
  assert.equal(progressLine('part 1/6:  10%|#  | 5.0M/82M\rpart 1/6:  20%|## | 16M/82M'), 'part 1/6:  20%|## | 16M/82M');
  assert.equal(progressLine('qwen2.5-coder-0.5b is already fetched: /x.gguf (491.4 MB)\n'), 'qwen2.5-coder-0.5b is already fetched: /x.gguf (491.4 MB)');
  assert.equal(progressLine('\r\n  \n'), undefined);
});
