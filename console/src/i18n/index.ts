/**
 * Consumer-page strings, one message file per language (en.json is the source; the others fall back
 * to it key by key). The Hausa, Igbo, Yoruba and Nigerian Pidgin files were written by the engineering
 * team and must be reviewed by native speakers before release (docs/console.md, "Translations").
 */
import en from './en.json';
import ha from './ha.json';
import ig from './ig.json';
import pcm from './pcm.json';
import yo from './yo.json';

export type Language = 'en' | 'ha' | 'ig' | 'yo' | 'pcm';
export type MessageKey = keyof typeof en;
export const LANGUAGES: Record<Language, { name: string; htmlLang: string; locale: string }> = {
  en: { name: 'English', htmlLang: 'en', locale: 'en-NG' },
  ha: { name: 'Hausa', htmlLang: 'ha', locale: 'ha-NG' },
  ig: { name: 'Igbo', htmlLang: 'ig', locale: 'ig-NG' },
  yo: { name: 'Yorùbá', htmlLang: 'yo', locale: 'yo-NG' },
  pcm: { name: 'Naijá (Pidgin)', htmlLang: 'pcm', locale: 'en-NG' },
};
export const MESSAGES: Record<Language, Partial<Record<MessageKey, string>>> = { en, ha, ig, yo, pcm };

export type Translate = (key: MessageKey, vars?: Record<string, string | number>) => string;

export function translator(lang: Language): Translate {
  const table = MESSAGES[lang] ?? en;
  return (key, vars) => {
    const text = table[key] ?? en[key] ?? key;
    return vars ? text.replace(/\{(\w+)\}/g, (m, k: string) => (k in vars ? String(vars[k]) : m)) : text;
  };
}
