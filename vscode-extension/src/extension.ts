/**
 * Entry point: wires the output channel, the status bar item, the server controller, the
 * commands and the settings listeners together. The logic lives in the modules it imports.
 */

import * as vscode from 'vscode';

import { readSettings } from './client';
import { COMMANDS } from './commands';
import { ServerController } from './controller';
import { onInterpreterChange } from './python';
import { SECTION, SERVER_KEYS, clientSettings } from './settings';
import { StatusBar } from './statusBar';

let controller: ServerController | undefined;

export function activate(context: vscode.ExtensionContext): void {
  // a log channel: the server's window/logMessage lines, its stderr, and the client's own lines
  const output = vscode.window.createOutputChannel('fimconstrain', { log: true });
  const statusBar = new StatusBar(clientSettings(readSettings()).enable);
  const server = new ServerController(output, statusBar);
  controller = server;
  context.subscriptions.push(output, statusBar);

  context.subscriptions.push(
    vscode.commands.registerCommand(COMMANDS.restartServer, () => server.restart()),
    vscode.commands.registerCommand(COMMANDS.toggle, toggleEnable),
    vscode.commands.registerCommand(COMMANDS.triggerInlineCompletion,
      () => vscode.commands.executeCommand('editor.action.inlineSuggest.trigger')),
    vscode.commands.registerCommand(COMMANDS.showOutput, () => output.show(true)),
    vscode.commands.registerCommand(COMMANDS.getModel, () => server.getModel()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration(`${SECTION}.interpreter`) || event.affectsConfiguration('python.defaultInterpreterPath')) {
        void server.refreshInterpreter();
      }
      if (event.affectsConfiguration(`${SECTION}.enable`)) {
        statusBar.setEnabled(clientSettings(readSettings()).enable);
      }
      if (SERVER_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
        void server.pushSettings();
      }
    }),
  );

  // neither waits: activation is done once the commands are there
  void server.start();
  // follow the interpreter selected in the Python extension (refreshInterpreter restarts the
  // server only when the interpreter it resolves to is another one)
  void onInterpreterChange(() => void server.refreshInterpreter()).then((following) => {
    if (following !== undefined) {
      context.subscriptions.push(following);
    }
  });
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}

/** Flips `fimconstrain.enable` where it is set: in the workspace if it is set there, else for the user. */
async function toggleEnable(): Promise<void> {
  const settings = readSettings();
  const inWorkspace = settings.inspect<boolean>('enable')?.workspaceValue !== undefined;
  await settings.update('enable', !clientSettings(settings).enable,
    inWorkspace ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global);
}
