/**
 * When an inline completion request goes to the server. No `vscode` import.
 *
 * VS Code asks for an inline completion after each edit and cancels the previous request. A
 * request first waits `debounceMs`; if a newer request or a cancellation comes meanwhile it is
 * dropped before it reaches the server, so typing a word costs one model run, not one per letter.
 * An explicit trigger (`Invoke`) goes out at once, even with `enable` off.
 */

/** The part of `vscode.CancellationToken` used here. */
export interface Cancellation {
  readonly isCancellationRequested: boolean;
  onCancellationRequested(listener: () => void): { dispose(): void };
}

export interface RequestPlan {
  /** Whether to ask the server at all. */
  ask: boolean;
  /** How long to wait first. */
  delayMs: number;
}

export function requestPlan(enable: boolean, debounceMs: number, invoked: boolean): RequestPlan {
  if (invoked) {
    return { ask: true, delayMs: 0 };
  }
  return { ask: enable, delayMs: enable ? debounceMs : 0 };
}

/** Lets only the newest of overlapping waits through. */
export class Debouncer {
  /** Ends the wait in progress, if any, with false. */
  private dropPending?: () => void;

  /** Resolves true after `ms`, or false (at once) if the token is cancelled or a newer `wait`
   * starts first. */
  wait(ms: number, token: Cancellation): Promise<boolean> {
    this.dropPending?.();
    if (token.isCancellationRequested) {
      return Promise.resolve(false);
    }
    return new Promise<boolean>((resolve) => {
      let done = false;
      let subscription: { dispose(): void } | undefined;
      const settle = (passed: boolean) => {
        if (done) {
          return;
        }
        done = true;
        clearTimeout(timer);
        subscription?.dispose();
        if (this.dropPending === drop) {
          this.dropPending = undefined;
        }
        resolve(passed);
      };
      const drop = () => settle(false);
      const timer = setTimeout(() => settle(true), ms);
      this.dropPending = drop;
      subscription = token.onCancellationRequested(drop);
      if (done) {  // a token that reports its cancellation synchronously
        subscription.dispose();
      }
    });
  }
}
