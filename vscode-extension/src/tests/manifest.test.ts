/** package.json against the code: commands, keybindings, entry point, VS Code version. */

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { COMMANDS } from '../commands';
import { EXTENSION_DIR, manifest } from './manifest';

test('the declared commands are exactly the ones the extension registers', () => {
  const declared = manifest.contributes.commands.map((c) => c.command).sort();
  assert.deepEqual(declared, Object.values(COMMANDS).sort());
});

test('the trigger command has a keybinding, and every keybinding names a declared command', () => {
  const bound = manifest.contributes.keybindings.map((k) => k.command);
  assert.ok(bound.includes(COMMANDS.triggerInlineCompletion));
  for (const command of bound) {
    assert.ok(Object.values(COMMANDS).includes(command as never), command);
  }
});

test('entry point and activation', () => {
  assert.equal(manifest.main, './out/extension.js');
  assert.ok(existsSync(join(EXTENSION_DIR, manifest.main)), 'compiled entry point');
  assert.deepEqual(manifest.activationEvents, ['onLanguage:python']);
});

test('engines.vscode is the VS Code version whose API types the code is compiled against', () => {
  assert.equal(manifest.engines.vscode, `^${manifest.devDependencies['@types/vscode']}`);
});
