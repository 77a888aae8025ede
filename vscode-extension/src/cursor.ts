/**
 * Telling the server where the cursor is, so that it completes there before it is asked (the
 * server's `fimconstrain/cursor` notification: lsp_server/server.py, `look_ahead`). No `vscode`
 * import.
 *
 * Said when a Python editor becomes active (a file opened at a search result or a definition)
 * and when its cursor moves other than by typing (a click, the arrow keys, a command): after a
 * keystroke an inline completion request comes anyway. A move counts once the cursor has rested
 * `REST_MS` (arrow keys held down say nothing until they stop), and the same place is never said
 * twice in a row.
 */

import { Place, samePlace } from './reask';

export const CURSOR_NOTIFICATION = 'fimconstrain/cursor';
/** How long the cursor rests at a place before the server is told. */
export const REST_MS = 150;

/** The notification's params for `place`. */
export function cursorParams(place: Place): { textDocument: { uri: string }; position: { line: number; character: number } } {
  return { textDocument: { uri: place.uri }, position: { line: place.line, character: place.character } };
}

export class CursorReporter {
  /** The version each document had at its last cursor: a newer one means the move was typing. */
  private readonly versions = new Map<string, number>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private last: Place | undefined;

  constructor(private readonly send: (place: Place) => void, private readonly restMs = REST_MS) {}

  /** The cursor is at `place` (undefined: no single empty selection, or not a Python editor);
   * `shown`: its editor has just become the active one. */
  moved(place: Place | undefined, shown = false): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (place === undefined) {
      return;
    }
    const seen = this.versions.get(place.uri);
    this.versions.set(place.uri, place.version);
    if ((!shown && seen !== undefined && seen !== place.version) || (this.last !== undefined && samePlace(this.last, place))) {
      return;  // typed (a request follows), or said already
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.last = place;
      this.send(place);
    }, this.restMs);
  }

  /** A document closed: forget it. */
  closed(uri: string): void {
    this.versions.delete(uri);
    if (this.last?.uri === uri) {
      this.last = undefined;
    }
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
