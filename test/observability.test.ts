/**
 * GET /metrics passes Prometheus' own linter, the alert rules pass `promtool check rules` and their
 * unit tests, and every metric the rules and the Grafana dashboard query is one the service exposes.
 * promtool comes from Debian's `prometheus` package (scripts/ensure-tools.sh installs it in npm test).
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT, startHarness, type Harness } from './helpers/harness.js';

let h: Harness;
test.before(async () => {
  h = await startHarness();
});
test.after.always(async () => {
  await h?.stop();
});

const promtool = (args: string[], input?: string, cwd = ROOT) => spawnSync('promtool', args, { input, cwd, encoding: 'utf8' });

async function scrape(): Promise<string> {
  // Traffic first, so that the labelled series (http, outcomes, stages, queues) are in the exposition.
  await fetch(`${h.url}/health`);
  await fetch(`${h.url}/no-such-route`);
  h.deps.metrics.outcome('identify', 'match');
  h.deps.metrics.stage('embed', 12);
  h.deps.metrics.queueState('liveness', { waiting: 1, active: 0, workers: 1 });
  const res = await fetch(`${h.url}/metrics`);
  return res.text();
}

test('GET /metrics is clean under promtool check metrics (no non-counter ending in _total)', async (t) => {
  const text = await scrape();
  t.true(text.includes('service_dependency_up{dependency="db"}'));
  const r = promtool(['check', 'metrics'], text);
  t.is(r.error, undefined, 'promtool must be installed (scripts/ensure-tools.sh)');
  t.is(r.status, 0, `promtool check metrics:\n${r.stdout}${r.stderr}`);
  // The per-type gauges that replace prom-client's *_total gauges are still there.
  t.regex(text, /^# TYPE nodejs_active_handles gauge$/m);
  t.notRegex(text, /^# TYPE \S+_total gauge$/m);
});

test('the alert rules pass promtool check rules and their unit tests', (t) => {
  const check = promtool(['check', 'rules', 'ops/prometheus/alerts.yml']);
  t.is(check.status, 0, `${check.stdout}${check.stderr}`);
  const unit = promtool(['test', 'rules', 'alerts.test.yml'], undefined, path.join(ROOT, 'ops', 'prometheus'));
  t.is(unit.status, 0, `${unit.stdout}${unit.stderr}`);
});

test('every metric the alert rules and the Grafana dashboard query is exposed by /metrics', async (t) => {
  const exposed = new Set(
    [...(await scrape()).matchAll(/^# TYPE (\S+) (\w+)$/gm)].flatMap(([, name, type]) =>
      type === 'histogram' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name!],
    ),
  );
  exposed.add('up'); // Prometheus' own per-target series
  const dashboard = JSON.parse(readFileSync(path.join(ROOT, 'ops', 'grafana', 'faceid-dashboard.json'), 'utf8')) as {
    panels: { targets: { expr: string }[] }[];
  };
  const exprs = [
    ...dashboard.panels.flatMap((p) => p.targets.map((x) => x.expr)),
    ...[...readFileSync(path.join(ROOT, 'ops', 'prometheus', 'alerts.yml'), 'utf8').matchAll(/expr: (?:\|\n)?([\s\S]*?)\n\s+(?:for|labels):/g)].map(
      (m) => m[1]!,
    ),
  ];
  t.true(exprs.length > 15);
  const checked = new Set<string>();
  const functions = new Set(['sum', 'max', 'min', 'rate', 'histogram_quantile', 'by', 'le', 'label_values']);
  for (const expr of exprs) {
    // Metric names: identifiers followed by a selector or standing alone, minus functions and label names.
    const names = [...expr.replace(/\{[^}]*\}/g, '{}').matchAll(/([a-z_][a-z0-9_]*)\s*(?=\{|\[|\)|$|\s*[=><!])/g)]
      .map((m) => m[1]!)
      .filter((n) => !functions.has(n));
    for (const n of names) {
      if (['route', 'stage', 'queue', 'state', 'status', 'instance', 'dependency', 'endpoint', 'outcome'].includes(n)) continue;
      checked.add(n);
      t.true(exposed.has(n), `${n} (in ${expr.trim().slice(0, 80)}) is not exposed by /metrics`);
    }
  }
  for (const n of [
    'service_dependency_up',
    'http_requests_total',
    'http_request_duration_seconds_bucket',
    'face_stage_duration_seconds_bucket',
    'face_queue_jobs',
    'face_queue_workers',
    'verification_outcomes_total',
  ]) {
    t.true(checked.has(n), `${n} was not found in the queries: ${[...checked].join(', ')}`);
  }
});
