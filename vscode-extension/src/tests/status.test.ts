/** status.ts: the server's status notification -> the status bar item's text, tooltip, colour, click. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { COMMANDS } from '../commands';
import { Phase, parseStatus, statusView } from '../status';

const running = (state: string, message: string, model: string | null = null, pythonVersion?: string): Phase => {
  const status = parseStatus({ state, message, model, pythonVersion });
  assert.ok(status, `${state} should parse`);
  return { kind: 'running', status };
};

test('busy shows the spinner and the message', () => {
  const view = statusView(running('busy', 'loading the shipped model'), true);
  assert.equal(view.text, '$(sync~spin) FIM');
  assert.match(view.tooltip, /^fimconstrain: loading the shipped model$/m);
  assert.equal(view.colour, 'normal');
  assert.equal(view.command, COMMANDS.toggle);
});

test('idle shows the model, and whether completions as you type are on', () => {
  const on = statusView(running('idle', 'ready: default_model (santacoder)', 'default_model'), true);
  assert.equal(on.text, '$(sparkle) FIM');
  assert.match(on.tooltip, /^Model: default_model$/m);
  assert.match(on.tooltip, /as you type: on/);
  const off = statusView(running('idle', 'ready: default_model (santacoder)', 'default_model'), false);
  assert.equal(off.text, '$(circle-slash) FIM');
  assert.match(off.tooltip, /as you type: off/);
  assert.equal(off.command, COMMANDS.toggle);
});

test('idle shows the Python version the last file was checked as, and why it is newer', () => {
  const message = 'ready: default_model (santacoder); new.py: Python 3.14 (it does not parse as 3.9)';
  const view = statusView(running('idle', message, 'default_model', '3.14'), true);
  assert.match(view.tooltip, /^Python: 3\.14$/m);
  assert.match(view.tooltip, /does not parse as 3\.9/);
  assert.doesNotMatch(statusView(running('idle', 'ready: m (santacoder)', 'm'), true).tooltip, /Python:/);
});

test('error turns the item red, shows the message and leads to the log', () => {
  const view = statusView(running('error', 'model /nope failed to load: no such directory'), true);
  assert.equal(view.text, '$(error) FIM');
  assert.equal(view.colour, 'error');
  assert.match(view.tooltip, /model \/nope failed to load: no such directory/);
  assert.equal(view.command, COMMANDS.showOutput);
});

test('busy wins over off: a completion asked for explicitly still spins', () => {
  assert.equal(statusView(running('busy', 'completing a.py'), false).text, '$(sync~spin) FIM');
});

test('starting, running without a status yet, and stopped', () => {
  const starting = statusView({ kind: 'starting', command: 'python3 -m lsp_server' }, true);
  assert.equal(starting.text, '$(sync~spin) FIM');
  assert.match(starting.tooltip, /starting python3 -m lsp_server/);
  assert.equal(statusView({ kind: 'running' }, true).text, '$(sparkle) FIM');
  const stopped = statusView({ kind: 'stopped', reason: 'could not start python3 -m lsp_server' }, true);
  assert.equal(stopped.colour, 'error');
  assert.equal(stopped.command, COMMANDS.showOutput);
  assert.match(stopped.tooltip, /not running: could not start/);
});

test('params that are not a status are rejected; a missing model is null', () => {
  for (const junk of [null, 'idle', 3, {}, { state: 'sleeping', message: 'x' }, { state: 'idle' }, { state: 'idle', message: 7 }]) {
    assert.equal(parseStatus(junk), undefined, JSON.stringify(junk));
  }
  assert.deepEqual(parseStatus({ state: 'idle', message: 'no model loaded' }),
    { state: 'idle', message: 'no model loaded', model: null, pythonVersion: null });
  assert.equal(parseStatus({ state: 'idle', message: 'ready', pythonVersion: 3.1 })?.pythonVersion, null);
});
