/**
 * Asking again once the model is loaded. No `vscode` import.
 *
 * VS Code asks for an inline completion after an edit and not again until the next one. The
 * server holds a request that comes while the model loads until the model is ready, but only for
 * so long (lsp_server's LOAD_WAIT_SECONDS); a slower load answers it with nothing, and the cursor
 * would then stay without a completion until the user types again. So when an as-you-type request
 * comes back empty while the server's status says no model is loaded, the place it asked at is
 * remembered, and the first status that says a model is loaded and the server is idle hands it
 * back: the extension asks again there if the editor is still at that place (same document
 * version, same empty selection).
 */

import { ServerStatus } from './status';

/** Where a request asked: a document at one version, and the cursor. */
export interface Place {
  uri: string;
  version: number;
  line: number;
  character: number;
}

export function samePlace(a: Place, b: Place): boolean {
  return a.uri === b.uri && a.version === b.version && a.line === b.line && a.character === b.character;
}

/** Whether an inline completion result holds no item (`undefined`, `null`, `[]`, `{ items: [] }`). */
export function isEmptyAnswer(result: unknown): boolean {
  if (result === undefined || result === null) {
    return true;
  }
  if (Array.isArray(result)) {
    return result.length === 0;
  }
  const items = (result as { items?: unknown }).items;
  return !Array.isArray(items) || items.length === 0;
}

export class ReAsk {
  /** Whether the latest status named a loaded model (none before the first status). */
  private loaded = false;
  /** The place of the latest answer, when it came back empty while no model was loaded. */
  private waiting: Place | undefined;

  /** An as-you-type request at `place` got its answer (`empty`: no item). The latest answer
   * decides: an earlier place is forgotten. */
  answered(place: Place, empty: boolean): void {
    this.waiting = empty && !this.loaded ? place : undefined;
  }

  /** The server's status changed: the place to ask again at (once), if this status is the first
   * to say that a model is loaded and nothing runs, after an answer that came too early. */
  status(status: ServerStatus): Place | undefined {
    this.loaded = status.model !== null;
    if (!this.loaded || status.state !== 'idle') {
      return undefined;
    }
    const place = this.waiting;
    this.waiting = undefined;
    return place;
  }
}
