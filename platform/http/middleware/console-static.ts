/**
 * Serves the browser consoles (console/, built by Vite into console/dist) under /console.
 *
 * The build output is read once into memory: a request can only ever name one of those files, so no
 * path from the URL reaches the file system (no traversal to think about), and the files are a few
 * hundred KiB. Hashed assets (/console/assets/*) are immutable; index.html is never cached, so a new
 * deployment is picked up at the next load.
 *
 * Every answer carries the page security headers: a strict Content-Security-Policy (scripts and styles
 * only from this origin, no inline script, no eval; the API only on this origin; camera for this origin
 * only), clickjacking protection (frame-ancestors 'none' and X-Frame-Options DENY), no MIME sniffing,
 * no referrer. See docs/console.md.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Middleware } from 'koa';
import { PROJECT_ROOT } from '../../paths.js';

export const CONSOLE_BASE = '/console';
export const CONSOLE_DIST = path.resolve(PROJECT_ROOT, 'console', 'dist');

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  // data: for the CSS library's inline SVG icons; blob: for the preview of a chosen photo.
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "media-src 'self' blob:",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const CONSOLE_HEADERS: Record<string, string> = {
  'Content-Security-Policy': CONSOLE_CSP,
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Permissions-Policy': 'camera=(self), microphone=(), geolocation=(), payment=()',
};

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.ico': 'image/x-icon',
};

interface StaticFile {
  body: Buffer;
  type: string;
  immutable: boolean;
}

function loadDist(dir: string): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  if (!existsSync(dir)) return files;
  const walk = (sub: string) => {
    for (const name of readdirSync(path.join(dir, sub))) {
      const rel = path.posix.join(sub, name);
      const abs = path.join(dir, rel);
      if (statSync(abs).isDirectory()) walk(rel);
      else
        files.set(`/${rel}`, { body: readFileSync(abs), type: TYPES[path.extname(name)] ?? 'application/octet-stream', immutable: rel.startsWith('assets/') });
    }
  };
  walk('');
  return files;
}

export function consoleStatic(dist = CONSOLE_DIST): Middleware {
  const files = loadDist(dist);
  return async (ctx, next) => {
    if (ctx.path !== CONSOLE_BASE && !ctx.path.startsWith(`${CONSOLE_BASE}/`)) return next();
    ctx.state.routeTemplate = CONSOLE_BASE;
    ctx.set(CONSOLE_HEADERS);
    if (ctx.path === CONSOLE_BASE) {
      ctx.redirect(`${CONSOLE_BASE}/`);
      return;
    }
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      ctx.status = 405;
      ctx.set('Allow', 'GET, HEAD');
      ctx.body = { error: 'method_not_allowed', message: 'The console is read with GET' };
      return;
    }
    const rel = ctx.path.slice(CONSOLE_BASE.length);
    const file = files.get(rel === '/' ? '/index.html' : rel);
    if (!file) {
      ctx.status = files.size ? 404 : 503;
      ctx.body = files.size
        ? { error: 'not_found', message: 'No such console file' }
        : { error: 'console_not_built', message: 'The console is not built: run npm run build:console (npm start and npm test do it)' };
      return;
    }
    ctx.type = file.type;
    ctx.set('Cache-Control', file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    ctx.body = file.body;
  };
}
