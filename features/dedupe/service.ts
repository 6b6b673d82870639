/**
 * One person, one identity (docs/dedupe.md): at link, the new face is searched 1:N against every other
 * live account's canonical embedding and against the face watch-list; every candidate in a band opens a
 * case that administrators decide. The consumer is never told about another account: the link answers
 * as it always does (`flag-and-continue`) or with a bare 422 `duplicate_identity` (`hard-block`).
 *
 * Bands (cosine, best candidate per account): at or above DEDUPE_THRESHOLD `duplicate`; in
 * [DEDUPE_REVIEW_THRESHOLD, DEDUPE_THRESHOLD) `possible_duplicate`. A watch-list entry at or above
 * DEDUPE_REVIEW_THRESHOLD is a `watchlist` hit: the list is small (FPIR ≈ entries × FMR), and a miss
 * there costs more than a review.
 *
 * The watch-list is searched here, in the web process, by exact cosine over its decrypted templates,
 * not in the search replicas: it holds tens to a few thousand faces (microseconds of dot products), the
 * replicas index users only, and keeping it out of them keeps listed faces out of /identify answers.
 */
import { randomUUID } from 'node:crypto';
import type { Config } from '../../platform/config.js';
import type { KeyRing } from '../../platform/keys/key-ring.js';
import { cosine, decodeEmbedding, encodeEmbedding } from '../../platform/face/embeddings.js';
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import { maskTail, type AuditEventsRepository } from '../../platform/events/audit.js';
import type { DedupeCaseRow, DedupeKind, DedupeRepository, DedupeStatus } from './repository.js';
import type { Tx, UnitOfWork } from '../../platform/database/unit-of-work.js';
import { maskName } from '../../platform/masking.js';
import type { Metrics } from '../../platform/metrics.js';
import { DEDUPE_METRICS } from './metrics.js';
import type { FaceService } from '../face/index.js';
import { pageOf, type Page, type PageRequest } from '../../platform/lists/paging.js';
import { caseSubject, watchlistSubject } from './sealed-families.js';

export { DEDUPE_KINDS, DEDUPE_STATUSES, type DedupeKind, type DedupeStatus } from './repository.js';

/** Accounts searched per link: each one in a band opens its own case. */
const CANDIDATES = 5;

export interface DedupeHit {
  kind: DedupeKind;
  score: number;
  matchedUserId: string | null;
  watchlistEntryId: string | null;
}

export interface DedupeCaseView {
  id: string;
  kind: DedupeKind;
  status: DedupeStatus;
  userId: string;
  matchedUserId?: string;
  watchlistEntryId?: string;
  score: number;
  registry: 'nin' | 'bvn';
  /** The link was refused (hard-block). */
  blocked: boolean;
  /** The sealed live capture is still kept (GET /dedupe/cases/{id}/capture). */
  captureAvailable: boolean;
  createdAt: string;
  decidedAt?: string;
  decidedBy?: string;
  note?: string;
}

/** What a reviewer sees of an account: masked, never a full number. */
export interface MaskedAccount {
  userId: string;
  name: string | null;
  phone: string | null;
  nin: string | null;
  ninLinkedAt: string | null;
  bvn: string | null;
  bvnLinkedAt: string | null;
  deleted: boolean;
}

export interface WatchlistEntryView {
  id: string;
  reason: string;
  createdAt: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const round4 = (x: number) => Math.round(x * 1e4) / 1e4;
const iso = (d: Date | string) => new Date(d).toISOString();

function toView(r: DedupeCaseRow): DedupeCaseView {
  return {
    id: r.id,
    kind: r.kind,
    status: r.status,
    userId: r.userId,
    ...(r.matchedUserId ? { matchedUserId: r.matchedUserId } : {}),
    ...(r.watchlistEntryId ? { watchlistEntryId: r.watchlistEntryId } : {}),
    score: round4(r.score),
    registry: r.registry,
    blocked: r.blocked,
    captureAvailable: r.hasCapture,
    createdAt: iso(r.createdAt),
    ...(r.decidedAt ? { decidedAt: iso(r.decidedAt) } : {}),
    ...(r.decidedBy ? { decidedBy: r.decidedBy } : {}),
    ...(r.note != null ? { note: r.note } : {}),
  };
}

export interface DedupeDeps {
  config: Config;
  unitOfWork: UnitOfWork;
  auditEvents: AuditEventsRepository;
  dedupe: DedupeRepository;
  keyRing: KeyRing;
  face: FaceService;
  metrics: Metrics;
  logger: Logger;
}

export class DedupeService {
  /**
   * The watch-list's templates, decrypted once and kept while the list does not change (checked on
   * every link by one aggregate query): decrypting a thousand sealed templates on every link would
   * cost ~20 ms (bench/dedupe.ts). Only this process's memory holds them in clear, as the search
   * replicas hold the canonical embeddings.
   */
  private watchlistCache: { engineVersion: string; stamp: string; templates: { id: string; vector: Float32Array }[] } | null = null;

  constructor(private readonly deps: DedupeDeps) {}

  // ---- at link -------------------------------------------------------------------------------

  /**
   * The hits of a new face: other live accounts in a band (never `userId` itself: a NIN linked before
   * a BVN is the same person), then watch-list entries. Read-your-writes: every link that answered
   * before this call is searched.
   */
  async screen(userId: string, embedding: number[], engineVersion: string): Promise<DedupeHit[]> {
    const { config, face } = this.deps;
    const [search, listed] = await Promise.all([
      face.searchByEmbedding(embedding, CANDIDATES, undefined, undefined, userId),
      this.watchlistHits(embedding, engineVersion),
    ]);
    const hits: DedupeHit[] = [];
    for (const h of search.hits) {
      if (h.userId === userId || h.score < config.dedupe.reviewThreshold) continue;
      hits.push({
        kind: h.score >= config.dedupe.threshold ? 'duplicate' : 'possible_duplicate',
        score: round4(h.score),
        matchedUserId: h.userId,
        watchlistEntryId: null,
      });
    }
    return [...hits, ...listed];
  }

  private async watchlistTemplates(engineVersion: string): Promise<{ id: string; vector: Float32Array }[]> {
    const { dedupe, keyRing } = this.deps;
    const stamp = await dedupe.watchlistStamp(engineVersion);
    const cached = this.watchlistCache;
    if (cached && cached.engineVersion === engineVersion && cached.stamp === stamp) return cached.templates;
    const templates = (await dedupe.watchlistTemplates(engineVersion)).map((t) => ({
      id: t.id,
      vector: decodeEmbedding(keyRing.open('templates', t.embeddingSealed, watchlistSubject(t.id))),
    }));
    this.watchlistCache = { engineVersion, stamp, templates };
    return templates;
  }

  private async watchlistHits(embedding: number[], engineVersion: string): Promise<DedupeHit[]> {
    const hits: DedupeHit[] = [];
    for (const t of await this.watchlistTemplates(engineVersion)) {
      const score = cosine(embedding, t.vector);
      if (score >= this.deps.config.dedupe.reviewThreshold) hits.push({ kind: 'watchlist', score: round4(score), matchedUserId: null, watchlistEntryId: t.id });
    }
    return hits;
  }

  /** Whether these hits refuse the link under DEDUPE_POLICY (a `possible_duplicate` never does). */
  blocks(hits: DedupeHit[]): boolean {
    return this.deps.config.dedupe.policy === 'hard-block' && hits.some((h) => h.kind !== 'possible_duplicate');
  }

  /**
   * Opens one case per hit in the caller's unit of work (with its AuditEvent and `dedupe.case.opened`
   * event), each keeping the live capture (JPEG, when there is one) sealed under its own case id.
   */
  async openCases(input: { userId: string; registry: 'nin' | 'bvn'; hits: DedupeHit[]; capture: Buffer | null; blocked: boolean }, trx: Tx): Promise<string[]> {
    const { dedupe, keyRing, auditEvents } = this.deps;
    const ids: string[] = [];
    for (const h of input.hits) {
      const id = randomUUID();
      await dedupe.insertCase(
        {
          id,
          kind: h.kind,
          userId: input.userId,
          matchedUserId: h.matchedUserId,
          watchlistEntryId: h.watchlistEntryId,
          score: h.score,
          registry: input.registry,
          blocked: input.blocked,
          captureSealed: input.capture ? keyRing.seal('captures', input.capture, caseSubject(id)) : null,
        },
        trx,
      );
      await auditEvents.record(
        {
          type: 'dedupe.case.opened',
          severity: h.kind === 'possible_duplicate' ? 'info' : 'high',
          actorType: 'system',
          actorId: null,
          subjectType: 'dedupe_case',
          subjectId: id,
          data: {
            kind: h.kind,
            userId: input.userId,
            ...(h.matchedUserId ? { matchedUserId: h.matchedUserId } : {}),
            ...(h.watchlistEntryId ? { watchlistEntryId: h.watchlistEntryId } : {}),
            score: h.score,
            registry: input.registry,
            blocked: input.blocked,
          },
          public: { caseId: id, kind: h.kind, userId: input.userId, status: 'open' },
        },
        trx,
      );
      ids.push(id);
    }
    return ids;
  }

  /** After the unit of work that opened them committed: metrics and a log line without biometrics. */
  casesOpened(hits: DedupeHit[], caseIds: string[], userId: string): void {
    for (const h of hits) this.deps.metrics.counter(DEDUPE_METRICS.casesOpened).inc({ kind: h.kind });
    if (hits.length)
      this.deps.logger.warn({ event: 'dedupe.case.opened', userId, caseIds, kinds: hits.map((h) => h.kind) }, 'duplicate-identity case opened at link');
  }

  // ---- administrators ------------------------------------------------------------------------

  async list(f: { status?: DedupeStatus; kind?: DedupeKind; page: number; pageSize: number }): Promise<Page<DedupeCaseView>> {
    const { rows, total } = await this.deps.dedupe.casePage(f);
    return pageOf(rows.map(toView), f, total);
  }

  private async load(id: string, trx?: Tx): Promise<DedupeCaseRow> {
    const row = UUID.test(id) ? await this.deps.dedupe.findCase(id, trx) : undefined;
    if (!row) throw new AppError('not_found', 'No such case');
    return row;
  }

  private async account(userId: string): Promise<MaskedAccount> {
    const a = await this.deps.dedupe.accountFacts(userId);
    return {
      userId,
      name: a?.name ? maskName(a.name) : null,
      phone: maskTail(a?.phone ?? null, 3),
      nin: maskTail(a?.nin ?? null, 3),
      ninLinkedAt: a?.ninLinkedAt ? iso(a.ninLinkedAt) : null,
      bvn: maskTail(a?.bvn ?? null, 3),
      bvnLinkedAt: a?.bvnLinkedAt ? iso(a.bvnLinkedAt) : null,
      deleted: !a || a.deletedAt != null,
    };
  }

  /** A case, with the masked details of both accounts and the watch-list entry's reason. */
  async get(
    id: string,
  ): Promise<{ case: DedupeCaseView; accounts: { user: MaskedAccount; matchedUser: MaskedAccount | null }; watchlistReason: string | null }> {
    const row = await this.load(id);
    const [user, matchedUser, entry] = await Promise.all([
      this.account(row.userId),
      row.matchedUserId ? this.account(row.matchedUserId) : Promise.resolve(null),
      row.watchlistEntryId ? this.deps.dedupe.watchlistEntry(row.watchlistEntryId) : Promise.resolve(undefined),
    ]);
    return { case: toView(row), accounts: { user, matchedUser }, watchlistReason: entry?.reason ?? null };
  }

  /** The case's live capture (JPEG), for an administrator's review; audited as a biometric read. */
  async capture(operatorId: string, id: string): Promise<Buffer> {
    const row = await this.load(id);
    // Past its period a capture is no longer shown, even in the moments before the sweep deletes it.
    const expired = row.decidedAt !== null && row.decidedAt.getTime() <= Date.now() - this.deps.config.dedupe.captureRetentionDays * 86_400_000;
    const sealed = expired ? null : await this.deps.dedupe.caseCapture(row.id);
    if (!sealed) throw new AppError('not_found', 'This case keeps no capture (none was taken at link, or its retention period has passed)');
    const jpeg = this.deps.keyRing.open('captures', sealed, caseSubject(row.id));
    await this.deps.auditEvents.record({
      type: 'dedupe.capture_viewed',
      actorType: 'operator',
      actorId: operatorId,
      subjectType: 'dedupe_case',
      subjectId: row.id,
      data: { kind: row.kind },
    });
    return jpeg;
  }

  async decide(operatorId: string, id: string, change: { status: 'confirmed' | 'dismissed'; note?: string }): Promise<DedupeCaseView> {
    const note = change.note === undefined || change.note.trim() === '' ? null : change.note;
    const view = await this.deps.unitOfWork.run(async (trx) => {
      const row = await this.load(id, trx);
      if (row.status !== 'open') throw new AppError('conflict', `The case was already ${row.status}`, { details: { status: row.status } });
      if (!(await this.deps.dedupe.decideCase(row.id, { status: change.status, note, decidedBy: operatorId }, trx))) {
        throw new AppError('conflict', 'The case was decided meanwhile; read it again');
      }
      await this.deps.auditEvents.record(
        {
          type: 'dedupe.case.decided',
          actorType: 'operator',
          actorId: operatorId,
          subjectType: 'dedupe_case',
          subjectId: row.id,
          data: { kind: row.kind, from: 'open', to: change.status, userId: row.userId, ...(note !== null ? { note } : {}) },
          // The note is free text: it stays out of the webhook.
          public: { caseId: row.id, kind: row.kind, userId: row.userId, status: change.status },
        },
        trx,
      );
      return toView(await this.load(row.id, trx));
    });
    this.deps.metrics.counter(DEDUPE_METRICS.decisions).inc({ status: change.status });
    return view;
  }

  // ---- the watch-list ------------------------------------------------------------------------

  private async addTemplate(
    operatorId: string,
    reason: string,
    embedding: number[],
    engineVersion: string,
    sourceCaseId: string | null,
  ): Promise<WatchlistEntryView> {
    const id = randomUUID();
    const row = await this.deps.unitOfWork.run(async (trx) => {
      const r = await this.deps.dedupe.insertWatchlistEntry(
        {
          id,
          reason,
          embeddingSealed: this.deps.keyRing.seal('templates', encodeEmbedding(embedding), watchlistSubject(id)),
          engineVersion,
          createdBy: operatorId,
          sourceCaseId,
        },
        trx,
      );
      await this.deps.auditEvents.record(
        {
          type: 'watchlist.entry_added',
          severity: 'high',
          actorType: 'operator',
          actorId: operatorId,
          subjectType: 'watchlist_entry',
          subjectId: id,
          data: { reason, ...(sourceCaseId ? { caseId: sourceCaseId } : {}) },
        },
        trx,
      );
      return r;
    });
    return { id: row.id, reason: row.reason, createdAt: iso(row.createdAt) };
  }

  /** Lists the largest face of an uploaded photo, embedded by the face workers. */
  async addFromPhoto(operatorId: string, photo: Buffer, reason: string): Promise<WatchlistEntryView> {
    const e = await this.deps.face.embedPhoto(photo);
    return this.addTemplate(operatorId, reason, e.embedding, e.engineVersion, null);
  }

  /** Lists the live capture of a confirmed case. */
  async addFromCase(operatorId: string, caseId: string, reason: string): Promise<WatchlistEntryView> {
    const row = await this.load(caseId);
    if (row.status !== 'confirmed') throw new AppError('conflict', "Only a confirmed case's capture can be watch-listed");
    const sealed = await this.deps.dedupe.caseCapture(row.id);
    if (!sealed) throw new AppError('not_found', 'This case keeps no capture');
    const e = await this.deps.face.embedPhoto(this.deps.keyRing.open('captures', sealed, caseSubject(row.id)));
    return this.addTemplate(operatorId, reason, e.embedding, e.engineVersion, row.id);
  }

  /** One page of the watch-list, newest first (no faces). */
  async watchlist(request: PageRequest): Promise<Page<WatchlistEntryView>> {
    const { rows, total } = await this.deps.dedupe.watchlistPage(request);
    return pageOf(
      rows.map((r) => ({ id: r.id, reason: r.reason, createdAt: iso(r.createdAt) })),
      request,
      total,
    );
  }

  async removeFromWatchlist(operatorId: string, id: string): Promise<void> {
    if (!UUID.test(id)) throw new AppError('not_found', 'No such watch-list entry');
    await this.deps.unitOfWork.run(async (trx) => {
      if (!(await this.deps.dedupe.removeWatchlistEntry(id, trx))) throw new AppError('not_found', 'No such watch-list entry');
      await this.deps.auditEvents.record(
        { type: 'watchlist.entry_removed', severity: 'high', actorType: 'operator', actorId: operatorId, subjectType: 'watchlist_entry', subjectId: id },
        trx,
      );
    });
  }
}
