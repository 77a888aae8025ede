/** interpreter.ts: which Python starts the server. */

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { InterpreterCandidates, SERVER_ARGS, expandPath, resolveInterpreter } from '../interpreter';

const base: InterpreterCandidates = { configured: '', platform: 'linux', home: '/home/ada' };

test('the setting wins over the Python extension and python.defaultInterpreterPath', () => {
  const found = resolveInterpreter({
    ...base, configured: '/opt/fim/bin/python', pythonExtension: '/usr/bin/python3.12', defaultInterpreterPath: '/usr/bin/python3',
  });
  assert.deepEqual(found, { command: '/opt/fim/bin/python', source: 'fimconstrain.interpreter' });
});

test('then the Python extension, then python.defaultInterpreterPath', () => {
  assert.deepEqual(resolveInterpreter({ ...base, pythonExtension: '/venv/bin/python', defaultInterpreterPath: '/usr/bin/python3' }),
    { command: '/venv/bin/python', source: 'Python extension' });
  assert.deepEqual(resolveInterpreter({ ...base, pythonExtension: '', defaultInterpreterPath: '/usr/bin/python3' }),
    { command: '/usr/bin/python3', source: 'python.defaultInterpreterPath' });
});

test('else python3, or python on Windows', () => {
  assert.deepEqual(resolveInterpreter(base), { command: 'python3', source: 'default' });
  assert.deepEqual(resolveInterpreter({ ...base, platform: 'win32', configured: '   ' }), { command: 'python', source: 'default' });
});

test('~, ${userHome} and ${workspaceFolder} are expanded', () => {
  assert.equal(resolveInterpreter({ ...base, configured: '~/venvs/fim/bin/python' }).command, '/home/ada/venvs/fim/bin/python');
  assert.equal(resolveInterpreter({ ...base, configured: '${workspaceFolder}/.venv/bin/python', workspaceFolder: '/src/app' }).command,
    '/src/app/.venv/bin/python');
  assert.equal(expandPath('${userHome}/bin/python', '/home/ada'), '/home/ada/bin/python');
  assert.equal(expandPath('~', '/home/ada'), '/home/ada');
  assert.equal(expandPath('~\\venv\\python.exe', 'C:\\Users\\ada'), 'C:\\Users\\ada\\venv\\python.exe');
});

test('what is not a leading ~, or a folder that is not open, stays as it is', () => {
  assert.equal(expandPath('/opt/~x/python', '/home/ada'), '/opt/~x/python');
  assert.equal(expandPath('~ada/python', '/home/ada'), '~ada/python');
  assert.equal(expandPath('${workspaceFolder}/python', '/home/ada'), '${workspaceFolder}/python');
  assert.equal(expandPath('${userHome}/python', '/home/$&'), '/home/$&/python');
});

test('the server runs as a module over stdio', () => {
  assert.deepEqual(SERVER_ARGS.slice(0, 2), ['-m', 'lsp_server']);
});
