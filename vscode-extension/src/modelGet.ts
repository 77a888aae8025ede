/**
 * "fimconstrain: Get a Code Model": `<python> -m fimconstrain model get NAME` in the server's
 * interpreter, its progress in a notification, then the server restarted so that its model
 * `auto` (the default) finds the model fetched. No `vscode` import: the command's wiring is in
 * controller.ts.
 */

/** The model the command fetches: the first of fimconstrain's known models, the one `auto` prefers. */
export const CODE_MODEL = 'qwen2.5-coder-0.5b';

export function modelGetArgs(name: string = CODE_MODEL): string[] {
  return ['-m', 'fimconstrain', 'model', 'get', name];
}

/** What to show of a chunk of the command's standard error: its last line with text (tqdm
 * redraws its bar after a carriage return), trimmed; undefined when it has none. */
export function progressLine(chunk: string): string | undefined {
  const lines = chunk.split(/\r\n|\r|\n/).map((line) => line.trim()).filter((line) => line !== '');
  return lines.length > 0 ? lines[lines.length - 1] : undefined;
}
