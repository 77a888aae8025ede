/**
 * The interpreter selected in the Python extension (ms-python.python), through its public
 * `environments` API, and its changes. Everything here degrades to "no answer": the extension may
 * be missing, disabled, still activating, or of a version without that API.
 */

import * as vscode from 'vscode';

const PYTHON_EXTENSION = 'ms-python.python';

/** The part of the Python extension's exported API used here (see @vscode/python-extension). */
interface PythonApi {
  ready?: Promise<void>;
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { id: string; path: string };
    resolveEnvironment(env: { id: string; path: string }): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

async function pythonApi(): Promise<PythonApi | undefined> {
  const extension = vscode.extensions.getExtension<PythonApi>(PYTHON_EXTENSION);
  if (extension === undefined) {
    return undefined;
  }
  const api = extension.isActive ? extension.exports : await extension.activate();
  await api?.ready;
  return api;
}

/** The executable of the active environment for `resource`, or undefined. */
export async function selectedInterpreter(resource: vscode.Uri | undefined, log: vscode.LogOutputChannel): Promise<string | undefined> {
  try {
    const environments = (await pythonApi())?.environments;
    if (environments === undefined) {
      return undefined;
    }
    const active = environments.getActiveEnvironmentPath(resource);
    // `path` may be an environment folder rather than an executable (conda): resolve it
    const resolved = await environments.resolveEnvironment(active);
    return resolved?.executable.uri?.fsPath ?? active.path;
  } catch (error) {
    log.warn(`could not ask the Python extension for its interpreter: ${String(error)}`);
    return undefined;
  }
}

/** Calls `listener` when the Python extension's selected interpreter changes. */
export async function onInterpreterChange(listener: () => void): Promise<vscode.Disposable | undefined> {
  try {
    return (await pythonApi())?.environments?.onDidChangeActiveEnvironmentPath(listener);
  } catch {
    return undefined;  // no Python extension to follow: nothing to listen to
  }
}
