/**
 * The least environment production starts with (platform/config.ts refuses to start without each of
 * these): one place, so a new production requirement changes one fixture, not every test that loads a
 * production configuration. Values are test-only and never reach a network.
 */
export function productionEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'production',
    JWT_PRIVATE_KEY: 'k',
    BIOMETRIC_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
    LINK_NUMBER_HASH_KEY: Buffer.alloc(32, 9).toString('base64'),
    SMS_WEBHOOK_URL: 'https://sms.example/send',
    REGISTRY_URL: 'https://registry.example/v1',
    REDIS_URL: 'redis://:a-redis-password@redis.internal:6379',
    METRICS_TOKEN: 'a-metrics-token-of-at-least-32-characters',
    OTP_SECRET: 'an-otp-secret-of-at-least-32-characters',
    ...overrides,
  };
}
