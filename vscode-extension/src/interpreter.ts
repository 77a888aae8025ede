/**
 * Which Python runs the server, and how it is started.
 *
 * Order: the `fimconstrain.interpreter` setting; else the interpreter selected in the Python
 * extension (ms-python.python); else `python.defaultInterpreterPath` when the user set it; else
 * `python3` (`python` on Windows, where `python3` is often the Store stub). No `vscode` import.
 */

/** The server's command line after the interpreter. Its stderr log is kept to errors (and
 * tracebacks): its info and warnings reach the client as `window/logMessage` already. */
export const SERVER_ARGS: readonly string[] = ['-m', 'lsp_server', '--log-level', 'ERROR'];

export type InterpreterSource = 'fimconstrain.interpreter' | 'Python extension' | 'python.defaultInterpreterPath' | 'default';

export interface Interpreter {
  command: string;
  /** Where the command came from, for the log and the status tooltip. */
  source: InterpreterSource;
}

export interface InterpreterCandidates {
  /** The `fimconstrain.interpreter` setting ('' when unset). */
  configured: string;
  /** The executable of the Python extension's active environment, when it has one. */
  pythonExtension?: string;
  /** `python.defaultInterpreterPath`, only when the user set it (its built-in default is `python`). */
  defaultInterpreterPath?: string;
  platform: string;
  /** For `~` and `${userHome}`. */
  home: string;
  /** For `${workspaceFolder}`: the first workspace folder, if any. */
  workspaceFolder?: string;
}

export function resolveInterpreter(c: InterpreterCandidates): Interpreter {
  const expand = (value: string) => expandPath(value, c.home, c.workspaceFolder);
  const candidates: [string | undefined, InterpreterSource][] = [
    [c.configured, 'fimconstrain.interpreter'],
    [c.pythonExtension, 'Python extension'],
    [c.defaultInterpreterPath, 'python.defaultInterpreterPath'],
  ];
  for (const [value, source] of candidates) {
    if (value !== undefined && value.trim() !== '') {
      return { command: expand(value.trim()), source };
    }
  }
  return { command: c.platform === 'win32' ? 'python' : 'python3', source: 'default' };
}

/** `~` at the start, `${userHome}` and `${workspaceFolder}` (left as is when there is no folder). */
export function expandPath(value: string, home: string, workspaceFolder?: string): string {
  let path = value.replace(/\$\{userHome\}/g, () => home);
  if (workspaceFolder !== undefined) {
    path = path.replace(/\$\{workspaceFolder\}/g, () => workspaceFolder);
  }
  return /^~(?=$|[\\/])/.test(path) ? home + path.slice(1) : path;
}
