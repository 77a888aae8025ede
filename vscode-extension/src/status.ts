/**
 * The status bar item's look, from the client's state and the server's `fimconstrain/status`
 * notification: `{"state": "busy" | "idle" | "error", "message": str, "model": str | null,
 * "pythonVersion": str | null}`, sent when the state changes (busy while the model loads or a
 * completion runs; `pythonVersion`: what the last completed file was checked as, and the message
 * says so when that is newer than the `pythonVersion` setting gave). No `vscode` import: the
 * `vscode` side only copies the view onto the item.
 */

import { COMMANDS, CommandId } from './commands';

export const STATUS_NOTIFICATION = 'fimconstrain/status';

export interface ServerStatus {
  state: 'busy' | 'idle' | 'error';
  message: string;
  model: string | null;
  /** The Python version the last completed file was checked as (null: none completed yet). */
  pythonVersion: string | null;
}

/** The notification's params, or undefined when they are not what the server sends. */
export function parseStatus(params: unknown): ServerStatus | undefined {
  if (typeof params !== 'object' || params === null) {
    return undefined;
  }
  const { state, message, model, pythonVersion } = params as Record<string, unknown>;
  if ((state !== 'busy' && state !== 'idle' && state !== 'error') || typeof message !== 'string') {
    return undefined;
  }
  return {
    state, message, model: typeof model === 'string' ? model : null,
    pythonVersion: typeof pythonVersion === 'string' ? pythonVersion : null,
  };
}

/** Where the client is. `running` carries the server's latest status (none yet right after
 * start, and none at all in mode `off`, where the server has nothing to report). */
export type Phase =
  | { kind: 'starting'; command: string }
  | { kind: 'running'; status?: ServerStatus }
  | { kind: 'stopped'; reason: string };

export interface StatusView {
  text: string;
  tooltip: string;
  /** 'error' gets the theme's error background. */
  colour: 'normal' | 'error';
  /** What a click runs: the log when something is wrong, else the on/off toggle. */
  command: CommandId;
}

const LABEL = 'FIM';

export function statusView(phase: Phase, enabled: boolean): StatusView {
  const toggleHint = enabled
    ? 'Completions as you type: on (click to turn off)'
    : 'Completions as you type: off (click to turn on)';
  const normal = (icon: string, lines: string[]): StatusView => ({
    text: `$(${icon}) ${LABEL}`, tooltip: [...lines, toggleHint].join('\n'), colour: 'normal', command: COMMANDS.toggle,
  });
  const failed = (lines: string[]): StatusView => ({
    text: `$(error) ${LABEL}`, tooltip: [...lines, 'Click to show the log'].join('\n'), colour: 'error',
    command: COMMANDS.showOutput,
  });
  switch (phase.kind) {
    case 'starting':
      return normal('sync~spin', [`fimconstrain: starting ${phase.command}`]);
    case 'stopped':
      return failed([`fimconstrain: the server is not running: ${phase.reason}`]);
    case 'running': {
      const status = phase.status;
      if (status === undefined) {
        return normal(enabled ? 'sparkle' : 'circle-slash', ['fimconstrain: server running']);
      }
      const lines = [
        `fimconstrain: ${status.message}`,
        ...(status.model ? [`Model: ${status.model}`] : []),
        ...(status.pythonVersion ? [`Python: ${status.pythonVersion}`] : []),
      ];
      if (status.state === 'error') {
        return failed(lines);
      }
      if (status.state === 'busy') {
        return normal('sync~spin', lines);
      }
      return normal(enabled ? 'sparkle' : 'circle-slash', lines);
    }
  }
}
