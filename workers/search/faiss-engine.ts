/**
 * The FAISS float engines (`Flat`, `IVF…`, `PQ…`, any inner-product factory string) behind the engine
 * interface: the previous index of the service (vector-index.ts), kept for comparison and for
 * deployments that want exact `Flat`. No snapshots (a start is a full build from PostgreSQL);
 * compaction and training are full rebuilds. Approximate types are re-scored exactly by the replica.
 */
import type { EngineBuilder, EngineKind, EngineRow, IndexEngine, RebuildPolicy, RebuildReason } from './engine.js';
import { VectorIndex, describeFactory, type FactoryInfo } from './vector-index.js';

export class FaissKind implements EngineKind {
  readonly snapshots = false;
  readonly info: FactoryInfo;
  constructor(readonly factory: string, private readonly nprobe: number, private readonly dim: number) {
    this.info = describeFactory(factory);
  }
  get sampleSize(): number {
    return VectorIndex.create({ factory: this.factory, nprobe: 1, dim: this.dim }, []).fallback ? this.info.trainSample : 0;
  }
  get snapshotKey(): string {
    return this.factory;
  }
  createEmpty(): IndexEngine {
    return VectorIndex.create({ factory: this.factory, nprobe: this.nprobe, dim: this.dim }, []);
  }
  startBuild(sample: readonly EngineRow[]): EngineBuilder {
    const index = VectorIndex.create({ factory: this.factory, nprobe: this.nprobe, dim: this.dim }, sample.map((r) => r.vector));
    return { add: (rows) => index.upsertMany(rows), finish: async () => ({ engine: index }), abort: () => {} };
  }
  rebuildReason(engine: IndexEngine, p: RebuildPolicy): RebuildReason {
    const index = engine as VectorIndex;
    if (index.fallback && index.size >= this.info.minTrain) return 'retrain';
    if (index.dead > 0 && index.dead >= Math.max(p.minDead, p.deadRatio * index.size)) return 'compact';
    return null;
  }
}
