/** settings.ts: what the server gets of the settings, and the client's own settings. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CLIENT_DEFAULTS, MAX_DEBOUNCE_MS, SERVER_KEYS, clientSettings, serverSettings } from '../settings';
import { readerWith, settingSchemas } from './manifest';

/** Keys the client reads itself (trace.server is vscode-languageclient's). */
const CLIENT_KEYS = ['enable', 'debounceMs', 'interpreter', 'trace.server'];

test('every declared setting is either a server key or a client key, and every key is declared', () => {
  const declared = [...settingSchemas().keys()].sort();
  assert.deepEqual(declared, [...SERVER_KEYS, ...CLIENT_KEYS].sort());
});

test('with the declared defaults the server gets every server key, and no client key', () => {
  const sent = serverSettings(readerWith());
  assert.deepEqual(Object.keys(sent).sort(), [...SERVER_KEYS].sort());
  assert.deepEqual(sent, {
    model: 'auto', runtime: 'auto', fimFormat: null, device: 'cpu', threads: null, context: null, promptWindow: 1024,
    suffixTokens: 32, server: null,
    serverModel: null, trustRemoteCode: false, mode: 'fim', maxTokens: 64, deadlineMs: 3000, multiline: 'auto', invokedItems: 3, temperature: 0.8, topK: 64, finishSearch: false,
    maxFileChars: 200000, pythonVersion: 'auto', semantic: true,
  });
});

test('set values are sent as they are', () => {
  const sent = serverSettings(readerWith({
    model: '/models/santacoder', fimFormat: 'santacoder', threads: 4, mode: 'prefix', maxTokens: 16, pythonVersion: '3.9',
    server: 'http://127.0.0.1:8000',
  }));
  assert.equal(sent.server, 'http://127.0.0.1:8000');
  assert.equal(sent.model, '/models/santacoder');
  assert.equal(sent.fimFormat, 'santacoder');
  assert.equal(sent.threads, 4);
  assert.equal(sent.mode, 'prefix');
  assert.equal(sent.maxTokens, 16);
  assert.equal(sent.pythonVersion, '3.9');
});

test('an emptied model, format, thread count or context is sent as null (so the server drops its old value)', () => {
  const sent = serverSettings(readerWith({ model: '  ', fimFormat: '', threads: 0, context: 0 }));
  assert.equal(sent.model, null);
  assert.equal(sent.fimFormat, null);
  assert.equal(sent.threads, null);
  assert.equal(sent.context, null);
});

test('a key the reader has no value for is left out', () => {
  const sent = serverSettings({ get: <T>(key: string) => (key === 'mode' ? ('off' as T) : undefined) });
  assert.deepEqual(sent, { mode: 'off' });
});

test('client defaults agree with package.json', () => {
  const schemas = settingSchemas();
  for (const [key, value] of Object.entries(CLIENT_DEFAULTS)) {
    assert.equal(schemas.get(key)?.default, value, key);
  }
  assert.deepEqual(clientSettings(readerWith()), CLIENT_DEFAULTS);
});

test('client settings: debounce is rounded and clamped, bad values fall back to the defaults', () => {
  assert.equal(clientSettings(readerWith({ debounceMs: -5 })).debounceMs, 0);
  assert.equal(clientSettings(readerWith({ debounceMs: 99.6 })).debounceMs, 100);
  assert.equal(clientSettings(readerWith({ debounceMs: 1e9 })).debounceMs, MAX_DEBOUNCE_MS);
  assert.equal(clientSettings(readerWith({ debounceMs: 'soon' })).debounceMs, CLIENT_DEFAULTS.debounceMs);
  assert.equal(clientSettings(readerWith({ debounceMs: Number.NaN })).debounceMs, CLIENT_DEFAULTS.debounceMs);
  assert.equal(clientSettings(readerWith({ enable: 'no' })).enable, true);
  assert.equal(clientSettings(readerWith({ enable: false })).enable, false);
  assert.equal(clientSettings(readerWith({ interpreter: '  /usr/bin/python3 ' })).interpreter, '/usr/bin/python3');
});
