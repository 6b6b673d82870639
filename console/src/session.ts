/**
 * A signed-in session, kept in memory only (docs/console.md, "Tokens"): the access token and the
 * refresh token live in this object and nowhere else — not localStorage, not sessionStorage, not a
 * cookie — so another script on the page after a reload, or an extension reading storage, finds
 * nothing. The cost: a reload signs you out. The access token is rotated one minute before it expires.
 */
import { createApiClient, type Api } from './api/client.js';

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
}

export class Session {
  readonly api: Api;
  private access: string | null = null;
  private refresh: string | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    pair: TokenPair,
    private readonly onEnd: (reason: 'signed_out' | 'expired') => void,
  ) {
    this.api = createApiClient('', () => this.access);
    this.accept(pair);
  }

  private accept(pair: TokenPair): void {
    this.access = pair.accessToken;
    this.refresh = pair.refreshToken;
    if (this.timer) clearTimeout(this.timer);
    const inMs = Math.max(5, pair.expiresIn - 60) * 1000;
    this.timer = setTimeout(() => void this.rotate(), inMs);
  }

  /** POST /auth/refresh with the current refresh token (single-use: the answer carries the next one). */
  async rotate(): Promise<boolean> {
    if (!this.refresh) return false;
    const { data } = await this.api.POST('/auth/refresh', { body: { refreshToken: this.refresh } });
    if (!data) {
      this.end('expired');
      return false;
    }
    this.accept(data);
    return true;
  }

  async signOut(): Promise<void> {
    const refreshToken = this.refresh;
    this.end('signed_out');
    if (refreshToken) await this.api.POST('/auth/logout', { body: { refreshToken } }).catch(() => undefined);
  }

  /** Forgets the tokens (after a deletion, a sign-out, or a refused refresh). */
  end(reason: 'signed_out' | 'expired'): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.access = null;
    this.refresh = null;
    this.onEnd(reason);
  }
}
