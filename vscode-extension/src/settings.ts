/**
 * The extension's settings (section `fimconstrain`) and the part of them the server gets.
 *
 * Three keys belong to the client (`enable`, `debounceMs`, `interpreter`; `trace.server` is read by
 * vscode-languageclient itself). The others are the server's own settings (lsp_server/config.py)
 * under the same camelCase names. They go to the server as `initializationOptions`, as the answer
 * to its `workspace/configuration` request and in `workspace/didChangeConfiguration`, so they must
 * not carry the client's keys (the server would log each one as unknown).
 *
 * No `vscode` import: the unit tests read settings from a plain object.
 */

export const SECTION = 'fimconstrain';

/** Reads one key of the section, as `vscode.WorkspaceConfiguration.get` does. */
export interface SettingsReader {
  get<T>(key: string): T | undefined;
}

/** The server's settings that the extension exposes, by their server name (all but `languages`:
 * the extension only sends Python documents). */
export const SERVER_KEYS = [
  'model', 'runtime', 'fimFormat', 'device', 'threads', 'context', 'promptWindow', 'suffixTokens', 'server',
  'serverModel', 'trustRemoteCode', 'mode',
  'maxTokens',
  'deadlineMs', 'multiline', 'invokedItems', 'temperature', 'topK', 'finishSearch', 'maxFileChars',
  'pythonVersion', 'semantic',
] as const;

/** Keys whose empty value in the settings UI ("" or 0) the server spells null: its default, and
 * for `model` the shipped model (its default is `auto`). Sending null, rather than leaving the key
 * out, matters after a change: the server keeps its previous value for a key it does not get. */
const EMPTY_MEANS_DEFAULT: ReadonlySet<string> = new Set([
  'model', 'fimFormat', 'threads', 'context', 'promptWindow', 'server', 'serverModel',
]);

/** What the server gets: every exposed key the reader has a value for. VS Code fills in the
 * contributed defaults, so in the editor every key is always sent. */
export function serverSettings(read: SettingsReader): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const key of SERVER_KEYS) {
    const value = read.get<unknown>(key);
    if (value === undefined) {
      continue;
    }
    const empty = value === 0 || (typeof value === 'string' && value.trim() === '');
    settings[key] = EMPTY_MEANS_DEFAULT.has(key) && empty ? null : value;
  }
  return settings;
}

/** The settings the extension acts on itself. */
export interface ClientSettings {
  /** Ask for completions as you type (an explicit trigger always asks). */
  enable: boolean;
  /** Quiet time after the last keystroke before an automatic request goes out. */
  debounceMs: number;
  /** Python executable that runs the server; '' follows the Python extension. */
  interpreter: string;
}

/** The defaults, as declared in package.json (a unit test checks that the two agree). */
export const CLIENT_DEFAULTS: Readonly<ClientSettings> = { enable: true, debounceMs: 50, interpreter: '' };

export const MAX_DEBOUNCE_MS = 5000;

export function clientSettings(read: SettingsReader): ClientSettings {
  const enable = read.get<unknown>('enable');
  const debounce = read.get<unknown>('debounceMs');
  const interpreter = read.get<unknown>('interpreter');
  return {
    enable: typeof enable === 'boolean' ? enable : CLIENT_DEFAULTS.enable,
    debounceMs: typeof debounce === 'number' && Number.isFinite(debounce)
      ? Math.min(Math.max(Math.round(debounce), 0), MAX_DEBOUNCE_MS)
      : CLIENT_DEFAULTS.debounceMs,
    interpreter: typeof interpreter === 'string' ? interpreter.trim() : CLIENT_DEFAULTS.interpreter,
  };
}
