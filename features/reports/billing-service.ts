/**
 * The billing report: a read-only combination of the static contracted-tier file (BILLING_TIERS_FILE,
 * `config/billing-tiers.json` in the repo) and the org's usage in the period.
 *
 * What is billable: every POST /identify by one of the org's operators that passed the attestation
 * check AND produced a face outcome (match, no_match, liveness_failed, no_face); the org is the one the
 * SearchLog row recorded at call time (falling back to the operator's current org for rows without it).
 * Calls refused before any work (no attestation, validation, authorisation) write no SearchLog row and
 * are not billed; calls that ended in a service failure (engine unavailable, dependency down) are
 * logged but not billed, since the customer got no result. /verify/self is the consumer's own action
 * and is never billed to an org.
 *
 * Amounts: a tier bills its committed includedVolume at unitPrice whether used or not, plus every
 * billable call beyond includedVolume at overagePrice. Arithmetic is in minor units (kobo), rendered
 * with two decimals.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import type { SearchLogsRepository } from '../verification/index.js';
import { check } from '../../platform/http/validation.js';
import { KNOWN_OUTCOMES } from './analytics-service.js';
import type { DateRange } from '../../platform/lists/date-range.js';
import { PROJECT_ROOT } from '../../platform/paths.js';

const Price = Type.Number({ minimum: 0 });
export const TierSchema = Type.Object(
  {
    includedVolume: Type.Integer({ minimum: 0 }),
    unitPrice: Price,
    overagePrice: Price,
    currency: Type.String({ pattern: '^[A-Z]{3}$' }),
  },
  { additionalProperties: false },
);
export const TiersFileSchema = Type.Object(
  {
    $comment: Type.Optional(Type.String()),
    tiers: Type.Record(Type.String({ minLength: 1 }), TierSchema),
    orgs: Type.Record(Type.String({ minLength: 1 }), Type.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);
export type TiersFile = Static<typeof TiersFileSchema>;

export const BILLABLE_OUTCOMES: readonly string[] = KNOWN_OUTCOMES;

export const BILLABLE_DEFINITION =
  'Every POST /identify by an operator of the org that passed the attestation check and produced a face outcome (match, no_match, liveness_failed, no_face). Calls that ended in a service failure are logged but not billed; /verify/self is never billed to an org.';

/** Reads and checks the tier file (an invalid file is a deployment error: 500, logged). */
export async function loadTiers(file: string): Promise<TiersFile> {
  const full = path.isAbsolute(file) ? file : path.resolve(PROJECT_ROOT, file);
  const parsed = JSON.parse(await readFile(full, 'utf8')) as unknown;
  const problems = check(TiersFileSchema, 'body', parsed);
  if (problems.length) throw new Error(`Invalid billing tier file ${full}: ${JSON.stringify(problems)}`);
  const tiers = parsed as TiersFile;
  if (!tiers.orgs.default) throw new Error(`Invalid billing tier file ${full}: the org "default" is missing`);
  for (const [org, tier] of Object.entries(tiers.orgs)) {
    if (!tiers.tiers[tier]) throw new Error(`Invalid billing tier file ${full}: org ${org} names unknown tier ${tier}`);
  }
  return tiers;
}

const minor = (major: number) => Math.round(major * 100);
const major = (minorUnits: number) => minorUnits / 100;

export class BillingService {
  constructor(private readonly deps: { searchLogs: SearchLogsRepository; config: Pick<Config, 'billing'> }) {}

  /** The org's bill for a range, from the tier file as it is now (re-read on every call). */
  async report(orgId: string, range: DateRange) {
    const tiers = await loadTiers(this.deps.config.billing.tiersFile);
    const tierName = Object.prototype.hasOwnProperty.call(tiers.orgs, orgId) ? tiers.orgs[orgId] : undefined;
    if (!tierName) throw new AppError('not_found', 'No contracted tier for this org');
    const tier = tiers.tiers[tierName]!;

    const rows = await this.deps.searchLogs.identifyOutcomesOfOrg(orgId, range);

    const byOutcome: Record<string, number> = Object.fromEntries(BILLABLE_OUTCOMES.map((o) => [o, 0]));
    let billable = 0;
    let notBilled = 0;
    for (const r of rows) {
      const n = Number(r.n);
      byOutcome[r.outcome] = (byOutcome[r.outcome] ?? 0) + n;
      if (BILLABLE_OUTCOMES.includes(r.outcome)) billable += n;
      else notBilled += n;
    }
    const overageVolume = Math.max(0, billable - tier.includedVolume);
    const committedMinor = tier.includedVolume * minor(tier.unitPrice);
    const overageMinor = overageVolume * minor(tier.overagePrice);
    return {
      orgId,
      tier: { name: tierName, ...tier },
      period: { from: range.from, to: range.to },
      currency: tier.currency,
      includedVolume: tier.includedVolume,
      usage: { billable, notBilled, byOutcome, definition: BILLABLE_DEFINITION },
      overage: { volume: overageVolume, unitPrice: tier.overagePrice, amount: major(overageMinor) },
      committedAmount: major(committedMinor),
      amountDue: major(committedMinor + overageMinor),
    };
  }
}
