/**
 * Fetches the face engine's ONNX models (SPEC section 5) into the models directory and checks them.
 *
 *   npx tsx scripts/fetch-models.ts          # fetch what is missing or wrong, verify everything
 *   npx tsx scripts/fetch-models.ts --check  # verify only; exit 1 if anything is missing or wrong
 *
 * The files come from `npm pack faceplugin-face-recognition-js@0.0.1` (never `npm install`: that package
 * drags in a web toolchain); only the four model files are extracted (system `tar`), each checked against
 * the SHA-256 pinned in platform/face/face-models.ts. A mismatch deletes the file and fails loudly.
 * Models directory: FACE_MODELS_DIR (absolute, or relative to the project root), default var/models.
 * Idempotent: when every file is present with the right hash it prints one line and exits.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, realpathSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadConfig } from '../processes/config.js';

import { FACE_MODEL_PACKAGE, FACE_MODEL_PACKAGE_DIR, FACE_MODELS, type FaceModel } from '../platform/face/face-models.js';

const execFileAsync = promisify(execFile);

/** The project root (the folder above scripts/). */
export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The models directory: FACE_MODELS_DIR (absolute, or relative to the project root) or var/models. */
export function modelsDir(env: NodeJS.ProcessEnv = process.env): string {
  // Only FACE_MODELS_DIR is wanted here: read in development mode, so that setup (run at build time,
  // before the production secrets exist) does not stop on production's refusals.
  return path.resolve(PROJECT_ROOT, loadConfig({ ...env, NODE_ENV: 'development' }).face.modelsDir);
}

export type ModelStatus = 'ok' | 'missing' | 'size_mismatch' | 'hash_mismatch';

export interface ModelCheck {
  model: FaceModel;
  path: string;
  status: ModelStatus;
  /** The SHA-256 found, when the file was hashed. */
  actualSha256?: string;
  /** The size found, when the file exists. */
  actualBytes?: number;
}

export interface ModelsVerification {
  dir: string;
  ok: boolean;
  checks: ModelCheck[];
}

/** Lower-case hex SHA-256 of a file, streamed. */
export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Checks one file against its pinned size and SHA-256. */
export async function checkModelFile(model: FaceModel, file: string): Promise<ModelCheck> {
  let bytes: number;
  try {
    const st = await stat(file);
    if (!st.isFile()) return { model, path: file, status: 'missing' };
    bytes = st.size;
  } catch {
    return { model, path: file, status: 'missing' };
  }
  if (bytes !== model.bytes) return { model, path: file, status: 'size_mismatch', actualBytes: bytes };
  const actualSha256 = await sha256File(file);
  return {
    model,
    path: file,
    status: actualSha256 === model.sha256 ? 'ok' : 'hash_mismatch',
    actualSha256,
    actualBytes: bytes,
  };
}

/**
 * Checks every model of platform/face/face-models.ts in `dir` (default: the configured models directory).
 * Never throws for a missing or wrong file: see `ok` and each check's `status`.
 */
export async function verifyModels(dir: string = modelsDir()): Promise<ModelsVerification> {
  const abs = path.resolve(PROJECT_ROOT, dir);
  const checks = await Promise.all(FACE_MODELS.map((m) => checkModelFile(m, path.join(abs, m.file))));
  return { dir: abs, ok: checks.every((c) => c.status === 'ok'), checks };
}

/** Like verifyModels, but throws one error listing every missing or wrong file. */
export async function assertModels(dir: string = modelsDir()): Promise<ModelsVerification> {
  const result = await verifyModels(dir);
  if (!result.ok) {
    const bad = result.checks.filter((c) => c.status !== 'ok').map(describeCheck);
    throw new Error(`face models in ${result.dir} are not usable: ${bad.join('; ')}. Run: npx tsx scripts/fetch-models.ts`);
  }
  return result;
}

function describeCheck(c: ModelCheck): string {
  switch (c.status) {
    case 'ok':
      return `${c.model.file} ok`;
    case 'missing':
      return `${c.model.file} missing`;
    case 'size_mismatch':
      return `${c.model.file} has ${c.actualBytes} bytes, expected ${c.model.bytes}`;
    case 'hash_mismatch':
      return `${c.model.file} has sha256 ${c.actualSha256}, expected ${c.model.sha256}`;
  }
}

async function run(cmd: string, args: string[], cwd: string): Promise<string> {
  try {
    const { stdout } = await execFileAsync(cmd, args, { cwd, maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} failed: ${(e.stderr || e.message).trim()}`, { cause: err });
  }
}

/**
 * Fetches every model that is missing or wrong in `dir` and verifies the result.
 * Throws (after deleting the offending file) when a fetched file does not match its pinned hash.
 */
export async function fetchModels(dir: string = modelsDir(), log: (line: string) => void = console.log) {
  const before = await verifyModels(dir);
  if (before.ok) return { fetched: [] as string[], verification: before };

  const todo = before.checks.filter((c) => c.status !== 'ok');
  for (const c of todo) log(`fetch-models: ${describeCheck(c)}`);

  await mkdir(before.dir, { recursive: true });
  const work = await mkdtemp(path.join(tmpdir(), 'face-models-'));
  try {
    // npm pack runs from the project root so that the project's and user's registry settings apply.
    log(`fetch-models: npm pack ${FACE_MODEL_PACKAGE}`);
    await run('npm', ['pack', FACE_MODEL_PACKAGE, '--pack-destination', work, '--silent'], PROJECT_ROOT);
    const tarball = (await readdir(work)).find((f) => f.endsWith('.tgz'));
    if (!tarball) throw new Error(`npm pack ${FACE_MODEL_PACKAGE} produced no tarball in ${work}`);

    const members = todo.map((c) => `${FACE_MODEL_PACKAGE_DIR}/${c.model.file}`);
    await run('tar', ['-xzf', path.join(work, tarball), '-C', work, ...members], work);

    const fetched: string[] = [];
    for (const c of todo) {
      const extracted = path.join(work, FACE_MODEL_PACKAGE_DIR, c.model.file);
      const check = await checkModelFile(c.model, extracted);
      if (check.status !== 'ok') {
        await rm(extracted, { force: true });
        await rm(c.path, { force: true });
        throw new Error(
          `SHA-256 MISMATCH for ${c.model.file} from ${FACE_MODEL_PACKAGE}: ${describeCheck(check)}. ` +
            `The file was deleted; refusing to use an unpinned model.`,
        );
      }
      // Copy next to the target, then rename: a concurrent reader never sees a half-written model.
      const partial = `${c.path}.partial-${process.pid}`;
      await copyFile(extracted, partial);
      await rename(partial, c.path);
      fetched.push(c.model.file);
    }

    const after = await verifyModels(before.dir);
    if (!after.ok) {
      for (const c of after.checks) if (c.status !== 'ok') await rm(c.path, { force: true });
      throw new Error(
        `face models still wrong after fetching: ${after.checks
          .filter((c) => c.status !== 'ok')
          .map(describeCheck)
          .join('; ')}`,
      );
    }
    return { fetched, verification: after };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

function relativeToRoot(p: string): string {
  const rel = path.relative(PROJECT_ROOT, p);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : p;
}

async function main(argv: string[]): Promise<number> {
  const dir = modelsDir();
  if (argv.includes('--check')) {
    const result = await verifyModels(dir);
    if (result.ok) {
      console.log(`fetch-models: ${result.checks.length} models verified (sha256) in ${relativeToRoot(dir)}`);
      return 0;
    }
    for (const c of result.checks) if (c.status !== 'ok') console.error(`fetch-models: ${describeCheck(c)}`);
    return 1;
  }
  const started = Date.now();
  const { fetched, verification } = await fetchModels(dir);
  const where = relativeToRoot(verification.dir);
  if (fetched.length === 0) {
    console.log(`fetch-models: ${verification.checks.length} models present and verified (sha256) in ${where}`);
  } else {
    console.log(
      `fetch-models: fetched ${fetched.join(', ')} into ${where}; all ${verification.checks.length} verified ` + `(sha256) in ${Date.now() - started} ms`,
    );
  }
  return 0;
}

function isMain(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(`fetch-models: ERROR: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    },
  );
}
