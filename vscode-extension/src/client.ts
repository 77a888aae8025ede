/**
 * The language client for one server process: `<python> -m lsp_server` over stdio, with
 * middleware that applies the client-side settings (`enable`, `debounceMs`) to inline completion
 * requests, tells `ReAsk` how as-you-type requests were answered, and gives the server only its
 * own settings.
 */

import * as vscode from 'vscode';
import {
  CloseAction, DidChangeConfigurationNotification, ErrorHandler, LanguageClient, LanguageClientOptions,
  RevealOutputChannelOn, ServerOptions, State, TransportKind,
} from 'vscode-languageclient/node';

import { Debouncer, requestPlan } from './debounce';
import { SERVER_ARGS } from './interpreter';
import { ReAsk, isEmptyAnswer } from './reask';
import { SECTION, clientSettings, serverSettings } from './settings';

/** The `fimconstrain` section as VS Code has it now. */
export function readSettings(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration(SECTION);
}

export function createClient(python: string, output: vscode.LogOutputChannel, reAsk: ReAsk): LanguageClient {
  const debouncer = new Debouncer();
  const restarts = new RestartPolicy();
  const serverOptions: ServerOptions = { command: python, args: [...SERVER_ARGS], transport: TransportKind.stdio };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file', language: 'python' }, { scheme: 'untitled', language: 'python' }],
    initializationOptions: () => serverSettings(readSettings()),
    outputChannel: output,
    // the status bar item turns red and leads to the log; no channel popping up mid-typing
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    errorHandler: restarts,
    middleware: {
      provideInlineCompletionItems: async (document, position, context, token, next) => {
        const { enable, debounceMs } = clientSettings(readSettings());
        const invoked = context.triggerKind === vscode.InlineCompletionTriggerKind.Invoke;
        const plan = requestPlan(enable, debounceMs, invoked);
        if (!plan.ask || !(await debouncer.wait(plan.delayMs, token))) {
          return undefined;
        }
        const answer = await next(document, position, context, token);
        if (!invoked && !token.isCancellationRequested) {
          const place = { uri: document.uri.toString(), version: document.version, line: position.line, character: position.character };
          reAsk.answered(place, isEmptyAnswer(answer));
        }
        return answer;
      },
      workspace: {
        // the server pulls its section: answer with the server's keys only
        configuration: async (params, token, next) => {
          const answer = await next(params, token);
          if (!Array.isArray(answer)) {
            return answer;
          }
          return answer.map((value, i) => (params.items[i]?.section === SECTION ? serverSettings(readSettings()) : value));
        },
      },
    },
  };
  const client = new LanguageClient(SECTION, 'fimconstrain', serverOptions, clientOptions);
  restarts.attach(client);
  return client;
}

/**
 * vscode-languageclient's policy (restart a crashed server up to 4 times in 3 minutes), but only
 * for a server that was running: one that exits while starting (no such interpreter, fimconstrain
 * not installed there) would fail the same way again, and `client.start()` reports it.
 */
class RestartPolicy implements ErrorHandler {
  private fallback: ErrorHandler | undefined;
  private ran = false;

  attach(client: LanguageClient): void {
    this.fallback = client.createDefaultErrorHandler();
    client.onDidChangeState(({ newState }) => {
      this.ran ||= newState === State.Running;
    });
  }

  error(...args: Parameters<ErrorHandler['error']>): ReturnType<ErrorHandler['error']> {
    return this.policy().error(...args);
  }

  closed(): ReturnType<ErrorHandler['closed']> {
    return this.ran ? this.policy().closed() : { action: CloseAction.DoNotRestart, handled: true };
  }

  private policy(): ErrorHandler {
    if (this.fallback === undefined) {
      throw new Error('RestartPolicy used before attach()');
    }
    return this.fallback;
  }
}

/** Sends the server its settings after a change (it reloads the model when a model key changed). */
export async function pushSettings(client: LanguageClient): Promise<void> {
  await client.sendNotification(DidChangeConfigurationNotification.type, {
    settings: { [SECTION]: serverSettings(readSettings()) },
  });
}
