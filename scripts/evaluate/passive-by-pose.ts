/**
 * The passive model's score of every real face in the fixture photos, beside its pose as a liveness
 * session reads it (yaw, pitch ratio; decision.ts). The synthesised turns of `npm run evaluate --
 * liveness` sometimes score low; this says whether real turned faces do.
 *
 *   npm run evaluate -- passive-by-pose
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { normaliseUpload } from '../../platform/face/image.js';
import type { FaceEngine } from '../../features/face/worker/pipeline/engine.js';
import { estimatePose, POSE_THRESHOLDS } from '../../features/liveness/decision.js';
import { FIXTURE_PHOTOS, FIXTURES_DIR } from '../../test/fixtures/faces/labels.js';

export async function passiveByPose(engine: FaceEngine, livenessThreshold: number, log: (line: string) => void): Promise<void> {
  const rows: { file: string; yaw: number; pitch: number; score: number }[] = [];
  for (const p of FIXTURE_PHOTOS) {
    const { jpeg } = await normaliseUpload(readFileSync(path.join(FIXTURES_DIR, p.file)));
    const a = await engine.analyse(jpeg);
    for (const [k, f] of a.faces.entries()) {
      const pose = estimatePose(f.landmarks5.map(([x, y]) => [x!, y!] as const));
      rows.push({ file: a.faces.length > 1 ? `${p.file}#${k}` : p.file, yaw: pose.yaw, pitch: pose.pitch, score: f.livenessScore });
    }
  }
  rows.sort((x, y) => Math.abs(y.yaw) - Math.abs(x.yaw));
  log('face                        yaw     pitch  passive');
  for (const r of rows) log(`${r.file.padEnd(26)} ${r.yaw.toFixed(2).padStart(6)} ${r.pitch.toFixed(2).padStart(8)} ${r.score.toFixed(3).padStart(8)}`);
  const turned = rows.filter((r) => Math.abs(r.yaw) >= POSE_THRESHOLDS.turnYaw);
  const facing = rows.filter((r) => Math.abs(r.yaw) < POSE_THRESHOLDS.turnYaw);
  const range = (rs: typeof rows) =>
    rs.length ? `${Math.min(...rs.map((r) => r.score)).toFixed(3)} to ${Math.max(...rs.map((r) => r.score)).toFixed(3)}` : '-';
  log(
    `turned as far as a turn step (|yaw| >= ${POSE_THRESHOLDS.turnYaw}): ${turned.length} faces, passive ${range(turned)}, below ${livenessThreshold}: ${turned.filter((r) => r.score < livenessThreshold).length}`,
  );
  log(`the others: ${facing.length} faces, passive ${range(facing)}, below ${livenessThreshold}: ${facing.filter((r) => r.score < livenessThreshold).length}`);
}
