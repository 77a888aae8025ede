/** The extension's command ids, shared by the code that registers them and the manifest test. */
export const COMMANDS = {
  restartServer: 'fimconstrain.restartServer',
  toggle: 'fimconstrain.toggle',
  triggerInlineCompletion: 'fimconstrain.triggerInlineCompletion',
  showOutput: 'fimconstrain.showOutput',
  getModel: 'fimconstrain.getModel',
} as const;

export type CommandId = (typeof COMMANDS)[keyof typeof COMMANDS];
