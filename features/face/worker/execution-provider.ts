/**
 * FACE_EXECUTION_PROVIDER: the face models on the CPU (default) or on an NVIDIA GPU (`cuda`), as a
 * setting rather than a code change. onnxruntime-node ships the CPU provider; its CUDA provider is a
 * separate download (docs/dependencies.md, skipped by our install) and needs the CUDA runtime and a
 * GPU. When `cuda` is asked and cannot run, the process says so in one log line and runs on the CPU:
 * a face process that refuses to start would be an outage for a performance setting.
 */
import type { Logger } from '../../../platform/logger.js';
import type { FaceEngine, FaceEngineOptions } from './pipeline/engine.js';

export type ExecutionProvider = 'cpu' | 'cuda';

export interface LoadedEngine {
  engine: FaceEngine;
  /** What was asked (FACE_EXECUTION_PROVIDER). */
  requested: ExecutionProvider;
  /** What runs. */
  provider: ExecutionProvider;
  /** Why the CPU runs although `cuda` was asked. */
  fallbackReason?: string;
}

export async function loadWithProvider(
  load: (opts: FaceEngineOptions) => Promise<FaceEngine>,
  requested: ExecutionProvider,
  logger: Pick<Logger, 'warn' | 'info'>,
): Promise<LoadedEngine> {
  if (requested === 'cuda') {
    try {
      // Only CUDA: onnxruntime would otherwise place unsupported nodes on the CPU silently, and a
      // session that cannot use CUDA at all must fail here, not run on the CPU under the name of CUDA.
      return { engine: await load({ executionProviders: ['cuda'] }), requested, provider: 'cuda' };
    } catch (e) {
      const fallbackReason = e instanceof Error ? e.message.split('\n')[0]! : String(e);
      logger.warn(
        { requested: 'cuda', provider: 'cpu', reason: fallbackReason },
        'FACE_EXECUTION_PROVIDER=cuda cannot run here: the face models run on the CPU',
      );
      return { engine: await load({ executionProviders: ['cpu'] }), requested, provider: 'cpu', fallbackReason };
    }
  }
  return { engine: await load({ executionProviders: ['cpu'] }), requested, provider: 'cpu' };
}

/** The Prometheus exposition of the provider gauge (the face process's GET /metrics). */
export function providerMetric(loaded: Pick<LoadedEngine, 'requested' | 'provider'>): string {
  return [
    '# HELP faceid_face_execution_provider The onnxruntime execution provider the face models run on (1 for the one that runs).',
    '# TYPE faceid_face_execution_provider gauge',
    `faceid_face_execution_provider{provider="${loaded.provider}",requested="${loaded.requested}"} 1`,
    '',
  ].join('\n');
}
