/** The status bar item: shows `statusView` of the latest phase and of the `enable` setting. */

import * as vscode from 'vscode';

import { Phase, statusView } from './status';

export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('fimconstrain.status', vscode.StatusBarAlignment.Right, 100);
  private phase: Phase = { kind: 'stopped', reason: 'not started yet' };

  constructor(private enabled: boolean) {
    this.item.name = 'fimconstrain';
    this.render();
    this.item.show();
  }

  show(phase: Phase): void {
    this.phase = phase;
    this.render();
  }

  setEnabled(enabled: boolean): void {
    this.enabled = enabled;
    this.render();
  }

  dispose(): void {
    this.item.dispose();
  }

  private render(): void {
    const view = statusView(this.phase, this.enabled);
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.command = view.command;
    this.item.backgroundColor = view.colour === 'error' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  }
}
