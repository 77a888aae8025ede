/**
 * Owns the server process: starts it with the interpreter resolved now, stops and restarts it,
 * forwards settings changes, keeps the status bar item in step with the client's state and the
 * server's `fimconstrain/status` notifications, and asks again where an as-you-type request was
 * answered before the model was loaded (reask.ts).
 */

import { spawn } from 'child_process';
import * as os from 'os';
import * as vscode from 'vscode';
import { LanguageClient, State } from 'vscode-languageclient/node';

import { createClient, pushSettings, readSettings } from './client';
import { CURSOR_NOTIFICATION, CursorReporter, cursorParams } from './cursor';
import { Interpreter, SERVER_ARGS, resolveInterpreter } from './interpreter';
import { selectedInterpreter } from './python';
import { CODE_MODEL, modelGetArgs, progressLine } from './modelGet';
import { Place, ReAsk, samePlace } from './reask';
import { clientSettings } from './settings';
import { STATUS_NOTIFICATION, parseStatus } from './status';
import { StatusBar } from './statusBar';

export class ServerController {
  private client: LanguageClient | undefined;
  private interpreter: Interpreter | undefined;
  /** Tells the running server where the cursor rests (cursor.ts); gone with the client. */
  private cursorWatch: vscode.Disposable | undefined;
  /** Start, stop and restart run one after the other, never interleaved. */
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly output: vscode.LogOutputChannel, private readonly statusBar: StatusBar) {}

  start(): Promise<void> {
    return this.enqueue(() => this.startNow());
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.stopNow());
  }

  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.stopNow();
      await this.startNow();
    });
  }

  /** Restarts the server if the interpreter it would be started with now is another one. */
  refreshInterpreter(): Promise<void> {
    return this.enqueue(async () => {
      const next = await findInterpreter(this.output);
      if (this.client !== undefined && next.command === this.interpreter?.command) {
        return;
      }
      await this.stopNow();
      await this.startNow(next);
    });
  }

  /** Fetches the code model `auto` prefers with `model get` in the server's interpreter, its
   * progress in a notification (cancellable), then restarts the server so that it loads it. */
  getModel(): Promise<void> {
    return this.enqueue(async () => {
      const interpreter = this.interpreter ?? (await findInterpreter(this.output));
      const fetched = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `fimconstrain: getting ${CODE_MODEL}`, cancellable: true },
        (progress, token) => runModelGet(interpreter.command, this.output, (line) => progress.report({ message: line }), token),
      );
      if (!fetched) {
        return;
      }
      void vscode.window.showInformationMessage(`fimconstrain: ${CODE_MODEL} is fetched; the server restarts with it`);
      await this.stopNow();
      await this.startNow(interpreter);
    });
  }

  /** Sends the server its current settings (when it is running; else it gets them when it starts). */
  async pushSettings(): Promise<void> {
    if (this.client?.state !== State.Running) {
      return;
    }
    try {
      await pushSettings(this.client);
    } catch (error) {  // the server went away meanwhile
      this.output.warn(`could not send the settings to the server: ${String(error)}`);
    }
  }

  /** Runs `operation` after the ones queued before it; the returned promise never rejects
   * (a failure is logged, and the status bar shows it). */
  private enqueue(operation: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(operation).catch((error: unknown) => this.output.error(String(error)));
    return this.queue;
  }

  private async startNow(interpreter?: Interpreter): Promise<void> {
    this.interpreter = interpreter ?? (await findInterpreter(this.output));
    const commandLine = [this.interpreter.command, ...SERVER_ARGS].join(' ');
    this.output.info(`starting the server: ${commandLine} (interpreter from ${this.interpreter.source})`);
    this.statusBar.show({ kind: 'starting', command: commandLine });

    const reAsk = new ReAsk();
    const client = createClient(this.interpreter.command, this.output, reAsk);
    this.client = client;
    client.onNotification(STATUS_NOTIFICATION, (params: unknown) => {
      const status = parseStatus(params);
      if (status === undefined) {
        this.output.warn(`ignored a ${STATUS_NOTIFICATION} notification with unexpected params: ${JSON.stringify(params)}`);
      } else if (this.client === client) {
        this.statusBar.show({ kind: 'running', status });
        const place = reAsk.status(status);
        if (place !== undefined) {
          void askAgain(place, this.output);
        }
      }
    });
    client.onDidChangeState(({ newState }) => {
      if (this.client !== client) {
        return;  // a client being stopped on purpose
      }
      if (newState === State.Starting) {
        this.statusBar.show({ kind: 'starting', command: commandLine });
      } else if (newState === State.Running) {
        this.statusBar.show({ kind: 'running' });
      } else {
        this.statusBar.show({ kind: 'stopped', reason: 'the server exited (see the log)' });
      }
    });
    try {
      await client.start();
    } catch (error) {
      this.failedToStart(commandLine, error);
      return;
    }
    this.cursorWatch = watchCursor(client, () => this.client === client);
  }

  /** vscode-languageclient has shown its own error message already; this says what to check. */
  private failedToStart(commandLine: string, error: unknown): void {
    const reason = error instanceof Error ? error.message : String(error);
    this.output.error(`could not start ${commandLine}: ${reason}. Is fimconstrain installed with its lsp and model extras `
      + 'in that environment? Choose another with the setting fimconstrain.interpreter or the Python extension.');
    this.statusBar.show({ kind: 'stopped', reason: `could not start ${commandLine}` });
  }

  private async stopNow(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.cursorWatch?.dispose();
    this.cursorWatch = undefined;
    if (client === undefined || !client.needsStop()) {
      return;  // none, or one that never started: no process to shut down
    }
    try {
      await client.dispose();
    } catch (error) {  // e.g. one that is restarting after a crash
      this.output.warn(`stopping the server: ${String(error)}`);
    }
  }
}

/** Runs `model get` (modelGet.ts) with `python`: true when it succeeded; its lines go to the log
 * and the last one to `report`; a failure or a cancel is said in the log and a message. */
function runModelGet(
  python: string, output: vscode.LogOutputChannel, report: (line: string) => void, token: vscode.CancellationToken,
): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(python, modelGetArgs(), { stdio: ['ignore', 'pipe', 'pipe'] });
    const cancel = token.onCancellationRequested(() => child.kill());
    const read = (data: Buffer) => {
      const line = progressLine(data.toString('utf8'));
      if (line !== undefined) {
        report(line);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    let said = '';
    child.stderr.on('data', (data: Buffer) => { said = (said + data.toString('utf8')).slice(-2000); });
    child.on('error', (error) => {
      output.error(`could not run ${python} -m fimconstrain model get: ${error.message}`);
      resolve(false);
    });
    child.on('close', (code) => {
      cancel.dispose();
      if (code === 0) {
        output.info(`fetched ${CODE_MODEL}`);
        resolve(true);
      } else if (!token.isCancellationRequested) {
        const why = progressLine(said) ?? `exit code ${code}`;
        output.error(`model get ${CODE_MODEL} failed: ${why}`);
        void vscode.window.showErrorMessage(`fimconstrain: could not get ${CODE_MODEL}: ${why}`);
        resolve(false);
      } else {
        resolve(false);
      }
    });
  });
}

/** Tells `client`'s server where the cursor of the active Python editor rests (cursor.ts), while
 * `current()` says the client is still this controller's and completions as you type are on. */
function watchCursor(client: LanguageClient, current: () => boolean): vscode.Disposable {
  const reporter = new CursorReporter((place) => {
    if (current() && client.state === State.Running && clientSettings(readSettings()).enable) {
      client.sendNotification(CURSOR_NOTIFICATION, cursorParams(place)).catch(() => undefined);
    }
  });
  reporter.moved(placeOf(vscode.window.activeTextEditor), true);
  return vscode.Disposable.from(
    reporter,
    vscode.window.onDidChangeActiveTextEditor((editor) => reporter.moved(placeOf(editor), true)),
    vscode.window.onDidChangeTextEditorSelection((event) => reporter.moved(placeOf(event.textEditor))),
    vscode.workspace.onDidCloseTextDocument((document) => reporter.closed(document.uri.toString())),
  );
}

/** Where `editor`'s cursor is, if it is a Python editor with one empty selection. */
function placeOf(editor: vscode.TextEditor | undefined): Place | undefined {
  if (editor === undefined || editor.document.languageId !== 'python' || editor.selections.length !== 1 || !editor.selection.isEmpty) {
    return undefined;
  }
  const cursor = editor.selection.active;
  return { uri: editor.document.uri.toString(), version: editor.document.version, line: cursor.line, character: cursor.character };
}

/** The interpreter the server would be started with now (see interpreter.ts for the order). */
async function findInterpreter(output: vscode.LogOutputChannel): Promise<Interpreter> {
  const configured = clientSettings(readSettings()).interpreter;
  const folder = vscode.workspace.workspaceFolders?.[0];
  const resource = vscode.window.activeTextEditor?.document.uri ?? folder?.uri;
  const defaultPath = vscode.workspace.getConfiguration('python', resource).inspect<string>('defaultInterpreterPath');
  return resolveInterpreter({
    configured,
    pythonExtension: configured === '' ? await selectedInterpreter(resource, output) : undefined,
    defaultInterpreterPath: defaultPath?.workspaceFolderValue ?? defaultPath?.workspaceValue ?? defaultPath?.globalValue,
    platform: process.platform,
    home: os.homedir(),
    workspaceFolder: folder?.uri.fsPath,
  });
}

/** Asks for inline completions again (VS Code's *Trigger Inline Suggestion*, an invoked
 * request) if the active editor is still at `place` and completions as you type are on. An
 * automatic request (the command's `explicit: false` in VS Code 1.139) would not do: VS Code asks
 * its providers again only when the text, the cursor or an explicit trigger says so. */
async function askAgain(place: Place, output: vscode.LogOutputChannel): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined || !editor.selection.isEmpty || !clientSettings(readSettings()).enable) {
    return;
  }
  const cursor = editor.selection.active;
  const here = { uri: editor.document.uri.toString(), version: editor.document.version, line: cursor.line, character: cursor.character };
  if (samePlace(place, here)) {
    output.info('the model is loaded: asking again for the completion that came before it');
    await vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
  }
}
