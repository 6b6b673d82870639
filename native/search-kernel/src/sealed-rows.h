// Per-row AES-256-GCM records of a snapshot's re-rank vectors (sealed-rows.cc; the file layout is
// described in features/search/worker/sealed-rows-file.ts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace sealed_rows {

constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr size_t kRecordOverhead = kNonceBytes + kTagBytes;

// One AES-256-GCM key, its schedule computed once; records are `nonce (12) | tag (16) | ciphertext`,
// the tail of the key ring's sealed blob (platform/keys/sealed-format.ts) after its version and key id.
// Not thread-safe: one per thread.
class RowCipher {
 public:
  explicit RowCipher(const uint8_t key[32]);
  ~RowCipher();
  RowCipher(const RowCipher&) = delete;
  RowCipher& operator=(const RowCipher&) = delete;
  // Seals `n` bytes of `plain` bound to `ad` into `record` (kRecordOverhead + n bytes), a random nonce.
  bool Seal(const uint8_t* plain, size_t n, const uint8_t* ad, size_t adn, uint8_t* record);
  // Opens a record of `n` plaintext bytes into `plain`; false when it does not authenticate.
  bool Open(const uint8_t* record, size_t n, const uint8_t* ad, size_t adn, uint8_t* plain);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace sealed_rows
