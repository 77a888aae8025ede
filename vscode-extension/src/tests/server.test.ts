/**
 * The real server, without VS Code: `<python> -m lsp_server` (the extension's command line) gets
 * the extension's initializationOptions, workspace/configuration answer and didChangeConfiguration,
 * takes every setting without a warning, advertises inline completion, sends a status the status
 * bar can show, answers textDocument/inlineCompletion and exits cleanly.
 *
 * Runs only when FIMCONSTRAIN_TEST_PYTHON names a Python with fimconstrain's `lsp` extra installed
 * (tests/test_vscode_extension.py sets it). Mode `off`, so no model is loaded.
 */

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import {
  ConfigurationRequest, DidChangeConfigurationNotification, DidOpenTextDocumentNotification, ExitNotification,
  InitializeRequest, InitializedNotification, InlineCompletionRequest, InlineCompletionTriggerKind, LogMessageNotification,
  MessageType, ShutdownRequest, StreamMessageReader, StreamMessageWriter, createProtocolConnection,
} from 'vscode-languageserver-protocol/node';

import { SERVER_ARGS } from '../interpreter';
import { SECTION, serverSettings } from '../settings';
import { STATUS_NOTIFICATION, ServerStatus, parseStatus, statusView } from '../status';
import { readerWith } from './manifest';

const python = process.env.FIMCONSTRAIN_TEST_PYTHON;
const skip = python ? false : 'set FIMCONSTRAIN_TEST_PYTHON to a Python with fimconstrain[lsp] installed';

test('the server takes the extension\'s settings and serves inline completions', { skip, timeout: 60_000 }, async () => {
  const server = spawn(python as string, [...SERVER_ARGS], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  server.stderr.on('data', (chunk) => { stderr += chunk; });
  const exited = new Promise<number | null>((resolve) => server.on('exit', (code) => resolve(code)));
  const connection = createProtocolConnection(new StreamMessageReader(server.stdout), new StreamMessageWriter(server.stdin));

  const settings = serverSettings(readerWith({ mode: 'off' }));
  const warnings: string[] = [];
  connection.onNotification(LogMessageNotification.type, ({ type, message }) => {
    if (type === MessageType.Error || type === MessageType.Warning) {
      warnings.push(message);
    }
  });
  const firstStatus = new Promise<ServerStatus | undefined>((resolve) => {
    connection.onNotification(STATUS_NOTIFICATION, (params: unknown) => resolve(parseStatus(params)));
  });
  connection.onRequest(ConfigurationRequest.type, ({ items }) => items.map((item) => (item.section === SECTION ? settings : null)));
  connection.listen();
  try {
    const init = await connection.sendRequest(InitializeRequest.type, {
      processId: process.pid, rootUri: null, initializationOptions: settings,
      capabilities: { workspace: { configuration: true }, textDocument: { inlineCompletion: {} } },
    });
    assert.ok(init.capabilities.inlineCompletionProvider, 'inlineCompletionProvider');
    await connection.sendNotification(InitializedNotification.type, {});

    // after initialized the server pulls its settings, then reports its state: idle, mode off
    const status = await firstStatus;
    assert.deepEqual(status, { state: 'idle', message: 'completions are off (mode: off)', model: null, pythonVersion: null });
    assert.equal(statusView({ kind: 'running', status }, true).text, '$(sparkle) FIM');

    await connection.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: settings } });
    const uri = 'file:///tmp/fimconstrain-extension-test.py';
    await connection.sendNotification(DidOpenTextDocumentNotification.type, {
      textDocument: { uri, languageId: 'python', version: 1, text: 'def f(x):\n    return \n' },
    });
    const answer = await connection.sendRequest(InlineCompletionRequest.type, {
      textDocument: { uri }, position: { line: 1, character: 11 }, context: { triggerKind: InlineCompletionTriggerKind.Invoked },
    });
    assert.deepEqual(answer, { items: [] });  // mode off: an empty answer, at once
    assert.deepEqual(warnings, [], 'the server warned about the settings it got');

    await connection.sendRequest(ShutdownRequest.type);
    await connection.sendNotification(ExitNotification.type);
    assert.equal(await exited, 0, `server exit code (stderr: ${stderr})`);
  } finally {
    connection.dispose();
    server.kill();
  }
});
