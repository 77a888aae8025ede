/** The extension's package.json, for tests that check the code against what it declares. */

import { readFileSync } from 'fs';
import { join } from 'path';

import { SettingsReader } from '../settings';

export interface SettingSchema {
  type: string | string[];
  default: unknown;
  enum?: unknown[];
}

export interface Manifest {
  main: string;
  activationEvents: string[];
  engines: { vscode: string };
  devDependencies: Record<string, string>;
  contributes: {
    commands: { command: string; title: string }[];
    keybindings: { command: string; key: string }[];
    configuration: { properties: Record<string, SettingSchema> };
  };
}

/** out/tests/ -> the extension's folder. */
export const EXTENSION_DIR = join(__dirname, '..', '..');

export const manifest: Manifest = JSON.parse(readFileSync(join(EXTENSION_DIR, 'package.json'), 'utf8'));

/** `fimconstrain.*` setting schemas by key without the section prefix. */
export function settingSchemas(): Map<string, SettingSchema> {
  const entries = Object.entries(manifest.contributes.configuration.properties);
  return new Map(entries.map(([name, schema]) => [name.replace(/^fimconstrain\./, ''), schema]));
}

/** A reader that answers like VS Code with no user settings: the declared defaults, overridden by `values`. */
export function readerWith(values: Record<string, unknown> = {}): SettingsReader {
  const schemas = settingSchemas();
  return {
    get<T>(key: string): T | undefined {
      return (key in values ? values[key] : schemas.get(key)?.default) as T | undefined;
    },
  };
}
